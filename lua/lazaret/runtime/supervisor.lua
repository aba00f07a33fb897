-- The Runtime Supervisor's steps (core/runtime/supervisor.h; spec 3.3,
-- 3.6, 3.7), run in the RS's own sealed Lua state by
-- bindings/runtime/l_supervisor.c. Each C step refuses unless the one
-- before it succeeded; Lua orders them and decides nothing else.
local M = {}

local error, pcall, type, ipairs = error, pcall, type, ipairs

M.steps = {
  "mount",            -- 1. root and State Anchor overlays; MOUNTS
  "start_router",     -- 1. workspace router started; it classifies meanwhile (spec 3.5)
  "start_egress",     -- 1. egress proxy forked in the host's netns (allow_domains)
  "start_helper",     -- 2. slirp4netns staged, acknowledged; enforcement netns
  "prove_canary",     -- 3. both canary endpoints answer
  "attach_egress",    -- 3. the proxy's link, listener and keyed answer
  "install_policy",   -- 3. tap0, exactly the derived policy, observed
  "attach_router",    -- 4. the router serves; its mount attached at /workspace's source
  "start_runsc",      -- 4. runsc run staged, acknowledged, released
  "await_running",    -- 4. the container runs
  "read_init_report", -- 5. the init's observations
  "finish_network",   -- 5. canary removed, CAP_NET_ADMIN dropped
  "report_ready",     -- 5. READY with the attestation record
}

-- rs: the lazaret.core.supervisor handle. Returns 0 after a clean stop,
-- 1 otherwise; a failed step ends in rs:abort(reason), which releases
-- what was built and reports FAILED to the HC.
function M.main(rs)
  local ran, e = pcall(function()
    for _, step in ipairs(M.steps) do
      local ok, msg = rs[step](rs)
      if not ok then error(step .. ": " .. msg, 0) end
    end
  end)
  if not ran then
    rs:abort(type(e) == "string" and e or "the supervisor failed")
    return 1
  end
  -- Ends on STOP, loss of the HC (the lease-loss path), or the loss of
  -- runsc, the router, the network helper or the egress proxy.
  local ended, smsg = rs:serve()
  if not ended then
    rs:abort("serve: " .. smsg)
    return 1
  end
  -- Nothing of the host bounds the sandbox's memory (runsc ignores
  -- cgroups); the RS watches it and stops the generation past its limit,
  -- before the host's OOM killer picks one of the developer's processes.
  if ended == "memory-exceeded" then
    rs:abort(smsg)
    return 1
  end
  -- Spec 3.5 router loss: /workspace already fails with ENOTCONN; the
  -- generation ends, nothing is copied between backings.
  if ended == "router-ended" then
    rs:abort("the workspace router ended")
    return 1
  end
  -- Spec 3.7: without slirp4netns the sandbox has no network path; the
  -- generation ends rather than serving new sessions without it.
  if ended == "network-helper-ended" then
    rs:abort("the network helper (slirp4netns) ended")
    return 1
  end
  -- Egress by name: without its proxy the sandbox has no way to a name.
  if ended == "egress-proxy-ended" then
    rs:abort("the egress proxy ended")
    return 1
  end
  -- The sandbox ends only when stopped: on its own it was lost (killed,
  -- or runsc failed); the generation ends failed, saying so.
  if ended == "runsc-ended" then
    rs:abort("the sandbox ended on its own (its runsc run client exited); runsc's log is in hc.log")
    return 1
  end
  -- Reports STOPPED, or FAILED with the reason, itself.
  return rs:stop() and 0 or 1
end

return M
