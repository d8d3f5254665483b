-- octflow-forward.lua: Orthanc forwards each Ophthalmic Tomography
-- instance it stores (a device's C-STORE, or any other way in) to
-- octflow by DICOMweb STOW-RS, as an asynchronous job of its own, through
-- the DICOMweb server "octflow" of octflow.json.
--
-- Orthanc 1.10's Lua has no heartbeat callback, so retries ride on its
-- jobs: when a STOW-RS job fails for a reason a new try can mend
-- (octflow away, a connection refused, a 5xx, 408 or 429), the instance
-- is sent again by a new job after OCTFLOW_RETRY_PAUSE_S seconds
-- (default 5), at most OCTFLOW_MAX_TRIES times (default 120: ten
-- minutes, a deploy); then its failed jobs stay in Orthanc's job list
-- (GET /jobs) for an operator. A refusal no try can mend is final at
-- once, logged and not retried, the instance left in Orthanc for a
-- person: octflow refused the instance (the same SOP Instance UID stored
-- with other content, an OCT it cannot read, another kind of object, a
-- file too large), or the request (a wrong token or URL). Orthanc's
-- DICOMweb client tells only 400, 401/403 and 404 apart from every other
-- status, so octflow.json asks octflow (header X-Octflow-Refusal-Status)
-- to answer such a refusal 400 instead of 409, 413, 415 or 422; keep that
-- header, or every refusal is retried as a network error, each retry
-- pausing every other forward. The pause holds Orthanc's Lua engine,
-- not its DICOM server: instances keep being received meanwhile, and
-- their callbacks run after it, so an octflow away for long delays every
-- forward; for outages longer than a deploy, resend from outside
-- instead. A restart of Orthanc forgets what it was retrying: send such instances
-- again with POST /dicom-web/servers/octflow/stow.
--
-- Once octflow answered an instance stored, Orthanc deletes its copy if
-- a device sent it by DICOM (C-STORE): a router keeps no identified scan
-- it no longer needs. What came another way (Orthanc's REST API, a
-- C-MOVE, a plugin) is forwarded and kept: such an Orthanc may be an
-- archive too. Set OCTFLOW_KEEP_FORWARDED=true to keep everything (a
-- holding period is then the site's to enforce, e.g. Orthanc's
-- MaximumStorageSize with recycling). What octflow refused, or what
-- failed every try, stays for a person. octflow.json pins
-- OverwriteInstances off, so the copy deleted is the one forwarded.

local OCT = '1.2.840.10008.5.1.4.1.1.77.1.5.4'
local pause = tonumber(os.getenv('OCTFLOW_RETRY_PAUSE_S') or '5')
local maxTries = tonumber(os.getenv('OCTFLOW_MAX_TRIES') or '120')
local keepForwarded = os.getenv('OCTFLOW_KEEP_FORWARDED') == 'true'
-- pending maps a STOW-RS job of this script to its instance and its try.
local pending = {}

-- forward starts a STOW-RS job that sends the instance to octflow;
-- fromDevice: it came by C-STORE, and goes once octflow stored it.
local function forward(instanceId, try, fromDevice)
  local job = ParseJson(RestApiPost('/dicom-web/servers/octflow/stow',
    DumpJson({ Resources = { instanceId }, Synchronous = false }, true)))
  pending[job['ID']] = { instance = instanceId, try = try, fromDevice = fromDevice }
  print('octflow: forwarding instance ' .. instanceId .. ' as job ' .. job['ID'] .. ' (try ' .. try .. ')')
end

function OnStoredInstance(instanceId, tags, metadata, origin)
  if tags['SOPClassUID'] == OCT then
    forward(instanceId, 1, origin ~= nil and origin['RequestOrigin'] == 'DicomProtocol')
  end
end

-- final says whether a failed job's error is one a new try cannot
-- mend: octflow refused the instance or the request for good (400: with
-- X-Octflow-Refusal-Status, every refusal no resend mends; 401/403: a
-- wrong or missing token; 404: a wrong URL). Orthanc reports every other
-- answer (503, 429, 408) and a connection that failed as a network
-- protocol error, and those are tried again.
local function final(jobId)
  local ok, job = pcall(function() return ParseJson(RestApiGet('/jobs/' .. jobId)) end)
  if not ok or job == nil then
    return false
  end
  -- The DICOMweb plugin's job reports the HTTP client's error in its
  -- content (Orthanc's error codes: 8 BadRequest, 17 UnknownResource,
  -- 29 Unauthorized; 9 NetworkProtocol for the rest).
  local code = job['Content'] and job['Content']['FunctionErrorCode']
  return code == 8 or code == 17 or code == 29
end

-- A failed job is not resubmitted (the STOW-RS client's request body
-- does not survive it): the instance is sent again by a new job.
function OnJobFailure(jobId)
  local p = pending[jobId]
  if p == nil then
    return -- not a job of this script
  end
  pending[jobId] = nil
  if final(jobId) then
    print('octflow: instance ' .. p.instance .. ' refused for good (job ' .. jobId .. '); not retried, left in Orthanc for an operator')
    return
  end
  if p.try >= maxTries then
    print('octflow: instance ' .. p.instance .. ' failed ' .. p.try .. ' times; left for an operator (job ' .. jobId .. ')')
    return
  end
  os.execute('sleep ' .. pause)
  forward(p.instance, p.try + 1, p.fromDevice)
end

-- octflow answered the instance stored: the router's copy of what a
-- device sent goes, unless OCTFLOW_KEEP_FORWARDED keeps it.
function OnJobSuccess(jobId)
  local p = pending[jobId]
  pending[jobId] = nil
  if p == nil or keepForwarded or not p.fromDevice then
    return
  end
  RestApiDelete('/instances/' .. p.instance)
  print('octflow: instance ' .. p.instance .. ' stored by octflow (job ' .. jobId .. '); deleted from this router')
end
