-- The Host Coordinator's launch and teardown sequencing (issue 4, spec
-- 3.3/3.6). Lua decides the order; every check is in C
-- (lazaret.core.domain): a mistake here can stop a launch, not weaken it.
-- Run as `lazaret __hc ...` by the first CLI of a Domain.
local M = {}

local io_stderr, string_format, ipairs, os_date = io.stderr, string.format, ipairs, os.date

local function log(msg)
  io_stderr:write(os_date("!%Y-%m-%dT%H:%M:%SZ"), " ", msg, "\n")
end

-- One CLI waits on our standard output for "ready" or the reason we failed.
local function report_failure(domain, msg, errno)
  domain.notify(string_format("error %d %s\n", errno or 5, msg))
end

function M.main(cmd)
  local domain = require("lazaret.core.domain")
  local config = require("lazaret.core.config")
  domain.detach()
  local cfg <close>, msg, errno = config.load({
    config = cmd.config, profile = cmd.profile, workspace = cmd.workspace,
  })
  if not cfg then
    report_failure(domain, msg, errno)
    return 78
  end
  -- Spec 3.2: a consumer resolving independently must match exactly.
  local s = cfg:summary()
  if s.domain_id ~= cmd.expect_domain or s.fingerprint ~= cmd.expect_fingerprint then
    report_failure(domain, "the configuration changed while the Domain was starting; try again", 116)
    return 78
  end

  local hc, hmsg, herr = domain.coordinator(cfg)
  if not hc then
    if herr == 16 then -- EBUSY: another coordinator holds the Domain
      log("not coordinating: " .. hmsg)
      domain.notify("busy\n")
      return 0
    end
    report_failure(domain, hmsg, herr)
    return 1
  end
  log("generation " .. hc:generation() .. " starting")

  -- Launch: prepared lower, supervisor and sandbox, publication.
  local steps = { "acquire_lower", "start", "publish" }
  for _, step in ipairs(steps) do
    local ok, smsg, serr = hc[step](hc)
    if not ok then
      log(step .. " failed: " .. smsg)
      report_failure(domain, smsg, serr)
      hc:stop()
      hc:release_lower()
      hc:close(false)
      return 1
    end
  end
  domain.notify("ready\n")
  log("generation " .. hc:generation() .. " published")

  local served, smsg = hc:serve()
  if not served then log("serve ended: " .. smsg) end

  -- Teardown in reverse: supervisor (exact unmount), then the lease.
  local ok = served
  local stopped, tmsg = hc:stop()
  if not stopped then
    log("stop failed: " .. tmsg)
    ok = false
  end
  if stopped then
    local released, rmsg = hc:release_lower()
    if not released then
      log("lease release failed: " .. rmsg)
      ok = false
    end
  end
  hc:close(ok and true or false)
  log("generation ended " .. (ok and "cleanly" or "with errors"))
  return ok and 0 or 1
end

return M
