-- Argo CD health of a weir.dev LakeTable, from the status the Weir operator writes (docs/gitops.md).
-- Healthy: the table exists and matches the spec. Progressing: being created or adopted, not reconciled
-- since the last change, or being deleted. Degraded: refused (ConfigMismatch), an invalid spec, or the
-- table cannot be reached (retried). Suspended: annotation weir.dev/paused is "true".
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
  return {status = "Progressing", message = "being deleted (spec.deletionPolicy decides whether the data goes)"}
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
if stalled ~= nil and stalled.status == "True" then
  return {status = "Degraded", message = say(stalled, "stalled")}
end
if status.phase == "Ready" and ready ~= nil and ready.status == "True" then
  return {status = "Healthy", message = say(ready, "ready")}
end
if status.phase == "Failed" then
  return {status = "Degraded", message = say(ready, status.lastError or "failed")}
end
return {status = "Progressing", message = say(ready, "pending")}
