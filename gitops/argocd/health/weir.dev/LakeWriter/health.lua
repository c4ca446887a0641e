-- Argo CD health of a weir.dev LakeWriter, from the status the Weir operator writes (docs/gitops.md).
-- Healthy: Running with its driver ready, or Succeeded. Progressing: Pending, Submitted, starting,
-- BackingOff (a restart is due; WaitingForWinner too), suspending, not reconciled since the last change,
-- or being deleted. Degraded: Failed, Aborted, a refused spec change or an invalid spec (each needs a
-- change: the message says which). Suspended: spec.state Suspended, or annotation weir.dev/paused.
local function condition(status, kind)
  if status == nil or status.conditions == nil then return nil end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then return c end
  end
  return nil
end

local function say(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then return c.reason .. ": " .. c.message end
  if c ~= nil and c.reason ~= nil then return c.reason end
  return fallback
end

local meta = obj.metadata or {}
local status = obj.status
if meta.deletionTimestamp ~= nil then
  return {status = "Progressing", message = "being deleted"}
end
local paused = condition(status, "ReconciliationPaused")
if paused ~= nil and paused.status == "True" then
  return {status = "Suspended", message = paused.message}
end
if status == nil or status.observedGeneration == nil then
  return {status = "Progressing", message = "waiting for the Weir operator to reconcile it"}
end
if meta.generation ~= nil and status.observedGeneration < meta.generation then
  return {status = "Progressing", message = "the operator has not reconciled generation " .. meta.generation .. " yet"}
end
local ready = condition(status, "Ready")
local stalled = condition(status, "Stalled")
local reconciling = condition(status, "Reconciling")
if stalled ~= nil and stalled.status == "True" then
  return {status = "Degraded", message = say(stalled, "stalled")}
end
local phase = status.phase
-- on its way to the spec: starting, backing off, suspending, a rerun waiting for its table
if reconciling ~= nil and reconciling.status == "True" then
  return {status = "Progressing", message = (phase or "Pending") .. " - " .. say(reconciling, "reconciling")}
end
if phase == "Failed" or phase == "Aborted" then
  return {status = "Degraded", message = say(ready, phase)}
end
if phase == "Suspended" then
  return {status = "Suspended", message = say(ready, "spec.state is Suspended")}
end
if phase == "Succeeded" or (phase == "Running" and ready ~= nil and ready.status == "True") then
  return {status = "Healthy", message = say(ready, phase)}
end
return {status = "Progressing", message = (phase or "Pending") .. " - " .. say(ready, "pending")}
