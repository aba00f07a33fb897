-- Entry point: host.c calls main(argv) under a traceback handler and exits
-- with the integer it returns. Exit codes: docs/cli.md.
local M = {}

local cli = require("lazaret.cli")
local io_write, io_stderr = io.write, io.stderr
local escape = require("lazaret.core.text").escape

M.EXIT = { ok = 0, problem = 1, usage = 64, unavailable = 69, software = 70, config = 78 }
local EXIT = M.EXIT

local function err(msg)
  -- messages carry names from images, sandboxes and the network
  io_stderr:write("lazaret: error: ", escape(msg), "\n")
end

-- The platform floor holds before anything is created (spec 3.3).
local function with_platform(fn, cmd)
  local ok, msg = require("lazaret.core.platform").check()
  if not ok then
    err(msg)
    return EXIT.unavailable
  end
  return fn(cmd)
end

local function config_check(cmd)
  local platform = require("lazaret.core.platform")
  local ok, msg = platform.check()
  if not ok then
    err(msg)
    return EXIT.unavailable
  end
  local config = require("lazaret.core.config")
  local cfg <close>, lmsg = config.load({
    config = cmd.config, profile = cmd.profile, workspace = cmd.workspace,
  })
  if not cfg then
    err(lmsg)
    return EXIT.config
  end
  local report = require("lazaret.config.report")
  local summary = cfg:summary()
  io_write(cmd.json and report.json(summary) or report.text(summary))
  return EXIT.ok
end

-- `lazaret <profile> [-- command...]` (DX-1): the exact argument vector
-- runs in the Domain's sandbox; the exit status is the command's.
local function launch(cmd)
  local config = require("lazaret.core.config")
  local platform = require("lazaret.core.platform")
  local ok, msg = platform.check()
  if not ok then
    err(msg)
    return EXIT.unavailable
  end
  local cfg <close>, lmsg = config.load({
    config = cmd.config, profile = cmd.profile, workspace = cmd.workspace,
  })
  if not cfg then
    err(lmsg)
    return EXIT.config
  end
  local session = require("lazaret.core.session")
  -- Interactive when the developer's stdin and stdout are a terminal
  -- (issue 5); otherwise the streams pass as they are.
  local status, rmsg = session.run(cfg, {
    argv = cmd.argv or { "/bin/bash" },
    terminal = session.interactive(),
  })
  if not status then
    err(rmsg)
    return EXIT.unavailable
  end
  return status
end

local actions = {
  help = function(cmd)
    io_write(cli.help_text(cmd.topic), "\n")
    return EXIT.ok
  end,
  version = function()
    io_write("lazaret ", require("lazaret.core.platform").version, "\n")
    return EXIT.ok
  end,
  ["config-check"] = config_check,
  diag = function(cmd)
    return require("lazaret.platform.diag").run({ json = cmd.json, report = cmd.report })
  end,
  ["state-list"] = function(cmd) return with_platform(require("lazaret.state").list, cmd) end,
  ["state-inspect"] = function(cmd) return with_platform(require("lazaret.state").inspect, cmd) end,
  ["state-reset"] = function(cmd) return with_platform(require("lazaret.state").reset, cmd) end,
  ["state-verify"] = function(cmd) return with_platform(require("lazaret.state").verify, cmd) end,
  ["state-rm"] = function(cmd) return with_platform(require("lazaret.state").rm, cmd) end,
  launch = launch,
  qualify = function(cmd) return with_platform(require("lazaret.qualify").main, cmd) end,
  hc = function(cmd) return require("lazaret.runtime.hc").main(cmd) end,
  ["image-prepare"] = function(cmd) return with_platform(require("lazaret.image").prepare, cmd) end,
  ["image-list"] = function(cmd) return require("lazaret.image").list(cmd) end,
  ["image-gc"] = function(cmd) return with_platform(require("lazaret.image").gc, cmd) end,
  ["image-build-default"] = function(cmd)
    return with_platform(require("lazaret.image").build_default, cmd)
  end,
  init = function(cmd)
    local config = require("lazaret.core.config")
    local text, next_steps = nil, "next: lazaret image build-default, then lazaret default\n"
    if cmd.agent then
      -- The same image plain init names; its refusals are init's own.
      local agents = require("lazaret.config.agents")
      local image, imsg = config.default_image()
      if not image then
        err(imsg)
        return EXIT.config
      end
      text, next_steps = agents.render(cmd.agent, image), agents.next_steps(cmd.agent)
    end
    local path, msg = config.init({ config = cmd.config, text = text })
    if not path then
      err(msg)
      return EXIT.config
    end
    -- A relative --config is joined to the working directory, whose
    -- names may be the sandbox's (in the workspace).
    io_write("wrote ", escape(path), "\n", next_steps)
    return EXIT.ok
  end,
}

function M.main(argv)
  local cmd, msg = cli.parse(argv)
  if not cmd then
    err(msg)
    io_stderr:write("Try 'lazaret --help'.\n")
    return EXIT.usage
  end
  return actions[cmd.action](cmd)
end

return M
