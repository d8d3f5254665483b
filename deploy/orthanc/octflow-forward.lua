-- octflow-forward.lua: Orthanc forwards each Ophthalmic Tomography
-- instance it stores (a device's C-STORE, or any other way in) to
-- octflow by DICOMweb STOW-RS, as an asynchronous job of its own, through
-- the DICOMweb server "octflow" of octflow.json.
--
-- Retries never wait in Orthanc's Lua engine (it is one engine for every
-- callback: a pause there held up every other forward). When a STOW-RS
-- job fails for a reason a new try can mend (octflow away, a connection
-- refused, a 5xx, 408 or 429), the instance is noted with the time of its
-- next try and the callback returns. The wait before try n+1 doubles
-- from OCTFLOW_RETRY_PAUSE_S (default 5) up to OCTFLOW_RETRY_MAX_PAUSE_S
-- (default 300), each drawn at random between half of it and all of it
-- (so that routers do not all come back at once); after OCTFLOW_MAX_TRIES
-- tries (default 40: 1½ to 3 hours) the instance is given up: logged
-- ("gave up … kept in Orthanc for an operator") and kept, never deleted.
--
-- Orthanc 1.10 (Debian 12's) calls a Lua script only on events and has
-- no timer (OnHeartBeat and LuaHeartBeatPeriod came with 1.11.1), so the
-- script makes its own wake-up: a background process sleeps until the
-- next try is due, outside Orthanc, and then asks Orthanc a C-FIND with
-- DCMTK's findscu (a dependency of Debian's orthanc package) as the AE
-- OCTFLOWTICK from this host. IncomingFindRequestFilter sends what is due
-- and answers that AE nothing (its query is made to match no study); the
-- script declares it (PUT /modalities/octflow-tick: loopback only, C-FIND
-- only, no C-STORE, C-MOVE or C-GET) the first time it needs it. A
-- wake-up is on its way only while a forward waits; any other callback
-- of the script also sends what is due. On Orthanc 1.11.1 or later,
-- "LuaHeartBeatPeriod" makes OnHeartBeat another wake-up. What is
-- waiting lives in this script's memory: a restart of Orthanc forgets it
-- (the instances stay in Orthanc: send them again with
-- POST /dicom-web/servers/octflow/stow).
--
-- A refusal no try can mend is final at once, logged and not retried,
-- the instance left in Orthanc for a person: octflow refused the instance
-- (the same SOP Instance UID stored with other content, an OCT it cannot
-- read, another kind of object, a file too large), or the request (a
-- wrong token or URL). Orthanc's DICOMweb client tells only 400, 401/403
-- and 404 apart from every other status, so octflow.json asks octflow
-- (header X-Octflow-Refusal-Status) to answer such a refusal 400 instead
-- of 409, 413, 415 or 422; keep that header, or every refusal is retried
-- as a network error until OCTFLOW_MAX_TRIES.
--
-- Once octflow answered an instance stored, Orthanc deletes its copy if
-- a device sent it by DICOM (C-STORE): a router keeps no identified scan
-- it no longer needs. What came another way (Orthanc's REST API, a
-- C-MOVE, a plugin) is forwarded and kept: such an Orthanc may be an
-- archive too. Set OCTFLOW_KEEP_FORWARDED=true to keep everything (a
-- holding period is then the site's to enforce, e.g. Orthanc's
-- MaximumStorageSize with recycling). What octflow refused, or what
-- was given up, stays for a person. octflow.json pins OverwriteInstances
-- off, so the copy deleted is the one forwarded.

local OCT = '1.2.840.10008.5.1.4.1.1.77.1.5.4'
local firstPause = tonumber(os.getenv('OCTFLOW_RETRY_PAUSE_S') or '5')
local maxPause = tonumber(os.getenv('OCTFLOW_RETRY_MAX_PAUSE_S') or '300')
local maxTries = tonumber(os.getenv('OCTFLOW_MAX_TRIES') or '40')
local keepForwarded = os.getenv('OCTFLOW_KEEP_FORWARDED') == 'true'

-- The wake-up's AE title, and the Study Instance UID its C-FIND is
-- turned into: the Verification SOP Class UID, which no study has.
local TICK_AET = 'OCTFLOWTICK'
local NO_STUDY = '1.2.840.10008.1.1'

-- pending maps a STOW-RS job of this script to its instance and its try.
local pending = {}
-- waiting maps an instance whose forward failed to its next try: its
-- number, when it is due (os.time()) and whether a device sent it.
local waiting = {}
-- tickAt is when the wake-up on its way is due; nil when none is.
local tickAt = nil
local tickModality = false

math.randomseed(os.time() + (tonumber(tostring({}):match('0x(%x+)') or '0', 16) or 0) % 1000003)

-- forward starts a STOW-RS job that sends the instance to octflow;
-- fromDevice: it came by C-STORE, and goes once octflow stored it.
local function forward(instanceId, try, fromDevice)
  local answer = RestApiPost('/dicom-web/servers/octflow/stow',
    DumpJson({ Resources = { instanceId }, Synchronous = false }, true))
  if answer == nil then
    -- The instance is gone (a person deleted it meanwhile) or the plugin
    -- refused the request: nothing to send, nothing to retry.
    print('octflow: could not start the forward of instance ' .. instanceId .. ' (try ' .. try .. '); not retried')
    return
  end
  local job = ParseJson(answer)
  pending[job['ID']] = { instance = instanceId, try = try, fromDevice = fromDevice }
  print('octflow: forwarding instance ' .. instanceId .. ' as job ' .. job['ID'] .. ' (try ' .. try .. ')')
end

-- pause is the wait after the failed try number `try`: doubling from
-- firstPause, at most maxPause, drawn between half of it and all of it,
-- in whole seconds.
local function pause(try)
  local full = math.min(maxPause, firstPause * 2 ^ (try - 1))
  return math.max(1, math.ceil(full / 2 + math.random() * full / 2))
end

-- startTick declares the wake-up's AE once (loopback, C-FIND only), then
-- starts a process that sleeps `delay` seconds outside Orthanc and asks
-- this Orthanc a C-FIND as that AE (three tries, five seconds apart).
-- The process closes what it inherited of Orthanc's descriptors (its
-- DICOM port among them) first, so that it never holds them.
local function startTick(delay)
  local config = GetOrthancConfiguration()
  local aet = config['DicomAet'] or 'ORTHANC'
  local port = math.tointeger(config['DicomPort'] or 4242)
  if not aet:match('^[%w%._%-]+$') or port == nil then
    print('octflow: cannot wake up for retries: DicomAet "' .. tostring(aet) .. '" or DicomPort is not plain; waiting forwards are sent on the next event')
    return false
  end
  if not tickModality then
    local declared = RestApiPut('/modalities/octflow-tick', DumpJson({
      AET = TICK_AET, Host = '127.0.0.1', Port = port,
      AllowEcho = false, AllowFind = true, AllowFindWorklist = false, AllowGet = false,
      AllowMove = false, AllowStore = false, AllowStorageCommitment = false }, true))
    if declared == nil then
      print('octflow: cannot declare the AE ' .. TICK_AET .. ' (PUT /modalities/octflow-tick); waiting forwards are sent on the next event')
      return false
    end
    tickModality = true
  end
  local find = string.format('findscu -aet %s -aec %s -S -to 10 -ta 10 -td 10 -k QueryRetrieveLevel=STUDY -k StudyInstanceUID=%s 127.0.0.1 %d',
    TICK_AET, aet, NO_STUDY, port)
  local script = 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"; done; ' ..
    string.format('sleep %d; for i in 1 2 3; do %s && exit 0; sleep 5; done', delay, find)
  os.execute("bash -c '" .. script .. "' </dev/null >/dev/null 2>&1 &")
  return true
end

-- arm makes sure a wake-up comes when the earliest waiting forward is
-- due: one already on its way in time is enough (one overdue by a minute
-- is taken for lost).
local function arm()
  local earliest = nil
  for _, w in pairs(waiting) do
    if earliest == nil or w.due < earliest then
      earliest = w.due
    end
  end
  if earliest == nil then
    return
  end
  local now = os.time()
  if tickAt ~= nil and tickAt <= earliest and tickAt > now - 60 then
    return
  end
  local delay = math.max(0, earliest - now)
  if startTick(delay) then
    tickAt = now + delay
  end
end

-- wake sends every waiting forward that is due, then arms the next
-- wake-up. It never waits.
local function wake()
  local now = os.time()
  if tickAt ~= nil and tickAt <= now then
    tickAt = nil
  end
  for instanceId, w in pairs(waiting) do
    if w.due <= now then
      waiting[instanceId] = nil
      forward(instanceId, w.try, w.fromDevice)
    end
  end
  arm()
end

function OnStoredInstance(instanceId, tags, metadata, origin)
  if tags['SOPClassUID'] == OCT then
    waiting[instanceId] = nil -- stored again: sent now, not later too
    forward(instanceId, 1, origin ~= nil and origin['RequestOrigin'] == 'DicomProtocol')
  end
  wake()
end

-- The wake-up's C-FIND: send what is due, and let that AE find nothing.
-- Every other C-FIND goes through as asked.
function IncomingFindRequestFilter(query, origin)
  if origin ~= nil and origin['RemoteAet'] == TICK_AET then
    wake()
    return { ['0008,0052'] = 'STUDY', ['0020,000d'] = NO_STUDY }
  end
  return query
end

-- Orthanc 1.11.1 or later, with "LuaHeartBeatPeriod": another wake-up.
function OnHeartBeat()
  wake()
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
-- does not survive it): the instance waits for its next try, when a new
-- job sends it again.
function OnJobFailure(jobId)
  local p = pending[jobId]
  if p == nil then
    return -- not a job of this script
  end
  pending[jobId] = nil
  if final(jobId) then
    print('octflow: instance ' .. p.instance .. ' refused for good (job ' .. jobId .. '); not retried, left in Orthanc for an operator')
  elseif p.try >= maxTries then
    print('octflow: instance ' .. p.instance .. ' failed ' .. p.try .. ' tries (last: job ' .. jobId ..
      '); gave up, kept in Orthanc for an operator (send it again with POST /dicom-web/servers/octflow/stow)')
  else
    local wait = pause(p.try)
    waiting[p.instance] = { try = p.try + 1, due = os.time() + wait, fromDevice = p.fromDevice }
    print('octflow: instance ' .. p.instance .. ' not stored by octflow (job ' .. jobId .. ', try ' .. p.try .. ' of ' ..
      maxTries .. '); next try in ' .. wait .. ' s')
  end
  wake()
end

-- octflow answered the instance stored: the router's copy of what a
-- device sent goes, unless OCTFLOW_KEEP_FORWARDED keeps it.
function OnJobSuccess(jobId)
  local p = pending[jobId]
  pending[jobId] = nil
  if p ~= nil and not keepForwarded and p.fromDevice then
    RestApiDelete('/instances/' .. p.instance)
    print('octflow: instance ' .. p.instance .. ' stored by octflow (job ' .. jobId .. '); deleted from this router')
  end
  wake()
end
