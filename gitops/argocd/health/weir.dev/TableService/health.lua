-- Argo CD health of a weir.dev TableService, from the status the Weir operator writes (docs/gitops.md).
-- Healthy: scheduled or waiting for its trigger, or running (runs are its normal life). Degraded: the
-- last run failed, or an invalid spec. Suspended: spec.suspend, or annotation weir.dev/paused.
-- Progressing: not reconciled since the last change, or being deleted.
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
local degraded = condition(status, "Degraded")
if stalled ~= nil and stalled.status == "True" then
  return {status = "Degraded", message = say(stalled, "stalled")}
end
if ready ~= nil and ready.status == "False" and ready.reason == "Suspended" then
  return {status = "Suspended", message = say(ready, "spec.suspend is true")}
end
if degraded ~= nil and degraded.status == "True" then
  return {status = "Degraded", message = say(degraded, "the last run failed")}
end
if ready ~= nil and ready.status == "True" then
  return {status = "Healthy", message = say(ready, "scheduled")}
end
return {status = "Progressing", message = say(ready, "pending")}
