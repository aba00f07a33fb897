-- `lazaret image prepare|list|gc` (issue 3): orchestration only; the
-- mechanisms and their checks are in C (lazaret.core.image).
local M = {}

local report = require("lazaret.image.report")
local io_write, io_stderr = io.write, io.stderr
local escape = require("lazaret.core.text").escape

local EXIT = { ok = 0, failed = 1, config = 78 }

local function err(msg)
  -- a refusal names the hostile layer entry
  io_stderr:write("lazaret: error: ", escape(msg), "\n")
end

local function load_config(cmd)
  local config = require("lazaret.core.config")
  local cfg, msg = config.load({ config = cmd.config })
  if not cfg then
    err(msg)
  end
  return cfg
end

local function prepare(cfg, cmd)
  local platform = require("lazaret.core.platform")
  local tty = platform.stderr_is_tty()
  local bar = report.progress(tty)
  local result, msg = require("lazaret.core.image").prepare(cfg, {
    image = cmd.image,
    progress = function(layer, n, done, total, waiting)
      local line = bar(layer, n, done, total, waiting)
      if line then io_stderr:write(line) end
    end,
  })
  local last = bar(nil)
  if last then io_stderr:write(last) end
  if not result then
    err(msg)
    return EXIT.failed
  end
  io_write(report.prepared(cmd.image, result))
  return EXIT.ok
end

function M.prepare(cmd)
  local cfg <close> = load_config(cmd)
  if not cfg then return EXIT.config end
  return prepare(cfg, cmd)
end

function M.build_default(cmd)
  local cfg <close> = load_config(cmd)
  if not cfg then return EXIT.config end
  io_stderr:write("building the default image with mmdebstrap (this downloads Debian packages)\n")
  local ref, msg = require("lazaret.core.image").build_default(cfg)
  if not ref then
    err(msg)
    return EXIT.failed
  end
  return prepare(cfg, { image = ref })
end

function M.list(cmd)
  local cfg <close> = load_config(cmd)
  if not cfg then return EXIT.config end
  local rows, msg = require("lazaret.core.image").list(cfg)
  if not rows then
    err(msg)
    return EXIT.failed
  end
  io_write(cmd.json and report.list_json(rows) or report.list_text(rows))
  return EXIT.ok
end

function M.gc(cmd)
  local cfg <close> = load_config(cmd)
  if not cfg then return EXIT.config end
  local items, msg = require("lazaret.core.image").gc(cfg, { dry_run = cmd.dry_run })
  if not items then
    err(msg)
    return EXIT.failed
  end
  io_write(report.gc_text(items, cmd.dry_run))
  return EXIT.ok
end

return M
