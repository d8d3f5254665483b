-- octflow-forward.lua: Orthanc forwards each Ophthalmic Tomography
-- instance it stores (a device's C-STORE, or any other way in) to
-- octflow by DICOMweb STOW-RS, as an asynchronous job of its own, through
-- the DICOMweb server "octflow" of octflow.json.
--
-- Orthanc 1.10's Lua has no heartbeat callback, so retries ride on its
-- jobs: when a STOW-RS job fails (octflow away or busy, a 503, or an
-- instance it refused), the instance is sent again by a new job after
-- OCTFLOW_RETRY_PAUSE_S seconds (default 10), at most OCTFLOW_MAX_TRIES
-- times (default 360: an hour); then its failed jobs stay in Orthanc's
-- job list (GET /jobs) for an operator.
-- The pause holds Orthanc's Lua engine, not its DICOM server: instances
-- keep being received meanwhile, and their callbacks run after it. A
-- restart of Orthanc forgets what it was retrying: send such instances
-- again with POST /dicom-web/servers/octflow/stow.

local OCT = '1.2.840.10008.5.1.4.1.1.77.1.5.4'
local pause = tonumber(os.getenv('OCTFLOW_RETRY_PAUSE_S') or '10')
local maxTries = tonumber(os.getenv('OCTFLOW_MAX_TRIES') or '360')
-- pending maps a STOW-RS job of this script to its instance and its try.
local pending = {}

-- forward starts a STOW-RS job that sends the instance to octflow.
local function forward(instanceId, try)
  local job = ParseJson(RestApiPost('/dicom-web/servers/octflow/stow',
    DumpJson({ Resources = { instanceId }, Synchronous = false }, true)))
  pending[job['ID']] = { instance = instanceId, try = try }
  print('octflow: forwarding instance ' .. instanceId .. ' as job ' .. job['ID'] .. ' (try ' .. try .. ')')
end

function OnStoredInstance(instanceId, tags, metadata, origin)
  if tags['SOPClassUID'] == OCT then
    forward(instanceId, 1)
  end
end

-- A failed job is not resubmitted (the STOW-RS client's request body
-- does not survive it): the instance is sent again by a new job.
function OnJobFailure(jobId)
  local p = pending[jobId]
  if p == nil then
    return -- not a job of this script
  end
  pending[jobId] = nil
  if p.try >= maxTries then
    print('octflow: instance ' .. p.instance .. ' failed ' .. p.try .. ' times; left for an operator (job ' .. jobId .. ')')
    return
  end
  os.execute('sleep ' .. pause)
  forward(p.instance, p.try + 1)
end

function OnJobSuccess(jobId)
  pending[jobId] = nil
end
