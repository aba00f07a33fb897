-- `lazaret diag --report FILE.lua`: a user's own report over the facts
-- `lazaret diag` observes (docs/reports.md).
--
-- The file is read and compiled by lazaret.core.script (no symbolic link,
-- a regular file of at most 1 MiB, Lua source text only) into the
-- restricted environment of lazaret.userenv: no shell, no files by name, no
-- environment, no loading of code or modules. What it gets is one table,
-- the global `lazaret`, also passed as the chunk's first argument:
--
--   lazaret.version       the lazaret version (string)
--   lazaret.probe         the probes diag uses (lazaret.core.probe):
--                         kernel(), identity(), subids(kind),
--                         subid_range(kind), file(path) (no symbolic link
--                         followed, no automount entered), device_rw(path)
--                         (path one of devices), userns(), descriptors(), egress(),
--                         memory(), library(name), landlock(), runtime_root(),
--                         locate(name), tool(name), and copies of tools,
--                         trusted_dirs, devices, errno
--   lazaret.checks()      the checks as `lazaret diag` judges them: a new
--                         list of {name=, status="ok"|"problem", detail=,
--                         fix=} on every call (probed once, on first use)
--   lazaret.text(checks)  diag's text report of a list of checks
--   lazaret.json(value)   value as one line of JSON (sorted keys)
--
-- Every table in it is a copy: the report can change them without
-- changing what the host sees. Output goes through print and io.write
-- (standard output). The report's return value is its verdict.
--
-- Exit status (M.EXIT):
--   0   the report returned true or nothing
--   1   the report returned false
--   65  the report raised an error while running (its own, or a name that
--       is not available to reports), or returned something else
--   66  the report file was refused before running: it cannot be read
--       (missing, unreadable, a symbolic link, not a regular file, larger
--       than 1 MiB) or it is not Lua source text (syntax error, bytecode)
local M = {}

local require, type, pairs, pcall, xpcall, tostring, error, next =
  require, type, pairs, pcall, xpcall, tostring, error, next
local format = string.format
local io = io -- io.stderr looked up per call

local diag = require("lazaret.platform.diag")
local report = require("lazaret.platform.report")
local json = require("lazaret.json")
local userenv = require("lazaret.userenv")

M.NOUN = "diag reports"
M.EXIT = { ok = 0, not_ready = 1, failed = 65, refused = 66 }

-- A deep copy of plain data: tables copied (without metatables), other
-- values as they are. Cycles keep their shape.
local function copy(v, seen)
  if type(v) ~= "table" then
    return v
  end
  seen = seen or {}
  if seen[v] then
    return seen[v]
  end
  local t = {}
  seen[v] = t
  for k, x in next, v do
    t[copy(k, seen)] = copy(x, seen)
  end
  return t
end
M.copy = copy

-- userreport.api(probe, version) -> the `lazaret` table of one report.
-- probe: lazaret.core.probe or a fake with its shape (specs).
function M.api(probe, version)
  if type(probe) ~= "table" then
    error("userreport.api: probe must be a table", 2)
  end
  local collected
  return {
    version = version,
    probe = copy(probe),
    checks = function()
      collected = collected or diag.collect(probe)
      return copy(collected)
    end,
    text = function(checks)
      return report.text(checks)
    end,
    json = function(value)
      return json.encode(value)
    end,
  }
end


local function fail(path, msg)
  local escape = require("lazaret.core.text").escape
  io.stderr:write("lazaret: error: report ", escape(path), ": ", escape(msg), "\n")
end

local RUN_OPTIONS = { probe = "table", version = "string" }

-- userreport.run(path [, opts]) -> exit status (M.EXIT). Loads and runs the
-- report at path; refusals and errors go to standard error. opts.probe and
-- opts.version are test seams (default: lazaret.core.probe and the binary's
-- version).
function M.run(path, opts)
  opts = opts == nil and {} or opts
  if type(path) ~= "string" or path == "" then
    error("userreport.run: path must be a non-empty string", 2)
  end
  if type(opts) ~= "table" then
    error("userreport.run: opts must be a table", 2)
  end
  for k, v in pairs(opts) do
    if RUN_OPTIONS[k] == nil then
      error(format("userreport.run: unknown option '%s'", tostring(k)), 2)
    end
    if type(v) ~= RUN_OPTIONS[k] then
      error(format("userreport.run: option '%s' must be a %s", k, RUN_OPTIONS[k]), 2)
    end
  end
  local probe = opts.probe or require("lazaret.core.probe")
  local version = opts.version or require("lazaret.core.platform").version
  local api = M.api(probe, version)
  local env = userenv.new({ lazaret = api }, M.NOUN)
  local chunk, msg = require("lazaret.core.script").load(path, "@" .. path, env)
  if not chunk then
    fail(path, msg)
    return M.EXIT.refused
  end
  local ok, verdict = xpcall(chunk, userenv.error_text, api)
  if not ok then
    fail(path, verdict)
    return M.EXIT.failed
  end
  if verdict == nil or verdict == true then
    return M.EXIT.ok
  elseif verdict == false then
    return M.EXIT.not_ready
  end
  fail(path, format("returned a %s (a report returns true, false or nothing)", type(verdict)))
  return M.EXIT.failed
end

return M
