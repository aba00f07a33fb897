-- Bootstrap recovery (spec 3.3, 3.6; issue 13): what the Host Coordinator
-- does, holding the Domain flock, before it begins a generation, in the
-- spec's order. Every step is a C check on the handle that refuses when
-- its evidence is missing (lazaret.core.coordinator): a lost generation is
-- recorded failed; the image lease of a generation whose every recorded
-- process is proved gone (exact pidfs identity) is released on matching
-- Domain evidence only (prepared-lower release intent, the catalog lease
-- rechecked under its lock, then the record clean: spec 3.6), and its
-- runtime tree removed on the same proof (its mounts died with its Runtime
-- Supervisor's mount namespace); anything not proved is kept and reported,
-- never adopted, and then the launch is refused (hc:recovered) rather than
-- started beside a generation that may still run.
local M = {}

local string_format, ipairs = string.format, ipairs

-- hc: an open coordinator handle; log(line) reports each decision.
-- Returns true, or nil, msg, errno (the launch must not go on).
function M.run(hc, log)
  local lost, msg, code = hc:lost_generation()
  if not lost then return nil, msg, code end
  if lost ~= 0 then
    log(string_format("generation %d was left by a lost coordinator; recording it as failed", lost))
    local ok, rmsg, rcode = hc:record_lost(lost)
    if not ok then return nil, rmsg, rcode end
  end
  local leases, lmsg, lcode = hc:release_lost_leases()
  if not leases then return nil, lmsg, lcode end
  for _, line in ipairs(leases) do log(line) end
  local trees, tmsg, tcode = hc:clean_runtime()
  if not trees then return nil, tmsg, tcode end
  for _, line in ipairs(trees) do log(line) end
  -- Domain clean of the store: what was proved gone is recorded so.
  local kept, kmsg, kcode = hc:retire_lost()
  if not kept then return nil, kmsg, kcode end
  for _, line in ipairs(kept) do log(line) end
  return hc:recovered()
end

return M
