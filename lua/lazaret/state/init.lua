-- `lazaret state list|inspect|verify|reset` (spec 3.9, FR-11, DX-6, OR-5): the order of
-- the steps; the checks and the mechanisms are in C (lazaret.core.state,
-- lazaret.core.coordinator: its open takes the Domain's exclusive
-- lifecycle lock and proves the last generation gone).
local M = {}

local report = require("lazaret.state.report")
local io_write, io_stderr, ipairs = io.write, io.stderr, ipairs
local escape = require("lazaret.core.text").escape
local errno = require("lazaret.core.errno")

M.EXIT = { ok = 0, failed = 1, usage = 64, config = 78 }
M.BUSY_WAIT_MS = 3000
local EXIT = M.EXIT

local function err(msg)
  io_stderr:write("lazaret: error: ", escape(msg), "\n")
end

-- The configuration, with the Domain's profile and workspace when
-- with_profile is set; nil (reported) when it does not load.
local function load_config(cmd, with_profile)
  local config = require("lazaret.core.config")
  local cfg, msg = config.load({ config = cmd.config, profile = with_profile and cmd.profile or nil,
    workspace = with_profile and cmd.workspace or nil })
  if not cfg then err(msg) end
  return cfg
end

-- DX-6: the question after the scope; --yes answers it, nothing else.
-- nil to go on, or the exit status when not confirmed.
local function confirmation(cmd, question, declined)
  if cmd.yes then return nil end
  local yes = require("lazaret.core.platform").confirm(question)
  if yes == nil then
    err("not asked: standard input is not a terminal; confirm with --yes")
    return EXIT.usage
  end
  if not yes then
    io_stderr:write(declined, "\n")
    return EXIT.failed
  end
  return nil
end

function M.list(cmd)
  local cfg <close> = load_config(cmd, false)
  if not cfg then return EXIT.config end
  local domains, lmsg = require("lazaret.core.state").list(cfg, { sizes = not cmd.no_sizes })
  if not domains then
    err(lmsg)
    return EXIT.failed
  end
  io_write(cmd.json and report.list_json(domains) or report.list_text(domains))
  return EXIT.ok
end

-- Spec 3.9: the Domain's exclusive lifecycle lock, as a Host Coordinator
-- holds it (the lost generation recorded, the leases of dead generations
-- released). A Domain whose last session just ended is still tearing down
-- for a moment: wait for its coordinator to let go (bounded), then refuse.
-- Not strict: the coordinator and, when recovery failed, its reason.
local function hold_domain(cfg, summary, what, strict)
  local platform = require("lazaret.core.platform")
  local coordinator = require("lazaret.core.coordinator")
  local deadline = platform.monotonic_ms() + M.BUSY_WAIT_MS
  local hc, msg, code = coordinator.open(cfg)
  while not hc and code == errno.EBUSY and platform.monotonic_ms() < deadline do
    platform.sleep_ms(100)
    hc, msg, code = coordinator.open(cfg)
  end
  if hc then
    -- Bootstrap recovery first, as a launch does; a reset needs it to have
    -- proved everything of an earlier generation gone, a verification
    -- reports what it kept.
    local ok, rmsg = require("lazaret.runtime.recovery").run(hc, function(line)
      io_stderr:write("lazaret: ", escape(line), "\n")
    end)
    if ok then return hc end
    if not strict then return hc, rmsg end
    hc:close()
    err(rmsg)
    return nil
  end
  if code == errno.EBUSY then
    err("the Domain is in use (profile " .. summary.profile .. " in " .. summary.workspace
      .. "): end its sessions, then " .. what)
  else
    err(msg)
  end
  return nil
end

-- Structural verification with the Domain held (nothing writes meanwhile).
function M.verify(cmd)
  local cfg <close> = load_config(cmd, true)
  if not cfg then return EXIT.config end
  local summary = cfg:summary()
  local hc <close>, rmsg = hold_domain(cfg, summary, "verify", false)
  if not hc then return EXIT.failed end
  local rows, vmsg = hc:verify()
  if not rows then
    err(vmsg)
    return EXIT.failed
  end
  -- Spec 3.6: residue recovery could not prove gone is a problem found,
  -- named first, whatever the structure shows.
  if rmsg then table.insert(rows, 1, { check = "recovery", ok = false, detail = rmsg }) end
  io_write(cmd.json and report.verify_json(summary, rows) or report.verify_text(summary, rows))
  for _, r in ipairs(rows) do
    if not r.ok then return EXIT.failed end
  end
  return EXIT.ok
end

-- Read-only: what the sandbox kept, compared with the profile's image.
function M.inspect(cmd)
  local cfg <close> = load_config(cmd, true)
  if not cfg then return EXIT.config end
  local result, imsg = require("lazaret.core.state").inspect(cfg, {
    paths = #cmd.paths > 0 and cmd.paths or nil, max = cmd.max,
  })
  if not result then
    err(imsg)
    return EXIT.failed
  end
  local summary = cfg:summary()
  io_write(cmd.json and report.inspect_json(summary, result) or report.inspect_text(summary, result))
  return EXIT.ok
end

-- Spec 3.9: the Domain is resolved from the configuration (profile and
-- workspace), never from a path; the safety conditions hold whatever
-- --yes says; the scope is shown before the question.
function M.reset(cmd)
  local cfg <close> = load_config(cmd, true)
  if not cfg then return EXIT.config end
  local summary = cfg:summary()
  local hc <close> = hold_domain(cfg, summary, "reset", true)
  if not hc then return EXIT.failed end
  local paths, pmsg = hc:reset_plan(cmd.all and {} or cmd.paths)
  if not paths then
    err(pmsg)
    return EXIT.failed
  end
  io_stderr:write(report.reset_scope(summary, paths))
  if #paths == 0 then return EXIT.ok end
  local declined = confirmation(cmd, "Reset? [y/N] ", "nothing was reset")
  if declined then return declined end
  local ok, rmsg = hc:reset(paths)
  if not ok then
    err(rmsg)
    return EXIT.failed
  end
  io_stderr:write(string.format("reset %d State Anchor%s\n", #paths, #paths == 1 and "" or "s"))
  return EXIT.ok
end

-- A Domain whose workspace is gone, by its ID (`state list` shows it).
function M.rm(cmd)
  local cfg <close> = load_config(cmd, false)
  if not cfg then return EXIT.config end
  local state = require("lazaret.core.state")
  local id, cmsg = state.remove_check(cfg, cmd.id)
  if not id then
    err(cmsg)
    return EXIT.failed
  end
  io_stderr:write(report.remove_scope(cmd.id, id))
  local declined = confirmation(cmd, "Remove? [y/N] ", "nothing was removed")
  if declined then return declined end
  local ok, rmsg = state.remove(cfg, cmd.id)
  if not ok then
    err(rmsg)
    return EXIT.failed
  end
  io_stderr:write("removed Domain " .. cmd.id .. "\n")
  return EXIT.ok
end

return M
