-- The restricted environment of a user's Lua file: a `lazaret diag
-- --report` report (lazaret.platform.userreport), a `lazaret qualify` suite
-- (lazaret.qualify). lazaret.core.script compiles the file with this table
-- as its only _ENV.
--
-- Threat: the file is the user's own, but it runs inside the sealed host
-- (docs/architecture.md, "The Lua host"), next to the host's modules and
-- its binding modules. It must get no ambient authority (a shell, files by
-- name, the environment, other code, C modules), and it must not be able to
-- change what the host's own code sees afterwards. So the environment holds
-- only fresh tables: copies of the pure libraries (string without dump,
-- table, math, utf8, coroutine), os reduced to time/clock/date/difftime,
-- io reduced to write (standard output), and the caller's API. Nothing in
-- it is a table of the host: not _G, package, package.loaded, debug or the
-- real string library (whose metatable getmetatable does not reveal).
--
-- Every name the file might reach for and does not get raises a clear
-- error instead of "attempt to call a nil value":
--   "os.execute is not available to <noun>"
--   "C modules cannot be loaded by <noun> (lazaret.core.probe)"
--   "modules cannot be loaded by <noun> (<name>)"
-- <noun> names the kind of file ("diag reports", "qualification suites").
local M = {}

local G, VERSION = _G, _VERSION
local error, type, pairs, ipairs, tostring, select, pcall = error, type, pairs, ipairs, tostring, select, pcall
local setmetatable, getmetatable = setmetatable, getmetatable
local string, table, math, utf8, coroutine, os = string, table, math, utf8, coroutine, os
local format, find = string.format, string.find
local io_write = io.write

-- Base functions handed over as they are: pure, no authority.
local SAFE_BASE = {
  "assert", "error", "ipairs", "next", "pairs", "pcall", "xpcall", "select", "tonumber",
  "tostring", "type", "rawequal", "rawlen", "rawget", "rawset", "setmetatable", "print",
}

-- Base functions that load code, reach the host's state or its warning
-- switch: replaced by refusals.
M.REFUSED_BASE = { "load", "loadfile", "dofile", "collectgarbage", "warn", "loadstring" }

-- Libraries copied whole, except string.dump (function bytecode: with a
-- binary loader it is the way to forge code, and nothing needs it).
local COPIED = { string = string, table = table, math = math, utf8 = utf8, coroutine = coroutine }
local NOT_COPIED = { string = { dump = true } }

M.OS_KEPT = { "time", "clock", "date", "difftime" }

-- The names the host itself removed or that give authority, refused by name
-- as functions that raise when called; any other field of os or io (io.stdout, ...)
-- raises when read.
M.REFUSED_OS = { "execute", "exit", "getenv", "remove", "rename", "tmpname", "setlocale" }
M.REFUSED_IO = { "popen", "open", "lines", "input", "output", "read", "tmpfile", "close",
  "type" }

local function refusal(name, noun)
  return function()
    error(name .. " is not available to " .. noun, 2)
  end
end

-- A table whose missing fields (read or written) raise "<lib>.<key> is not
-- available to <noun>"; known fields are ordinary. Its metatable is hidden.
local function guarded(lib, fields, noun)
  local function refuse(_, key)
    error(format("%s.%s is not available to %s", lib, tostring(key), noun), 2)
  end
  return setmetatable(fields, { __index = refuse, __newindex = refuse, __metatable = false })
end

-- io.write for standard output only: returns nothing (io.write would hand
-- out the host's io.stdout handle, whose methods include close).
local function write_stdout(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    local t = type(v)
    if t ~= "string" and t ~= "number" then
      error(format("bad argument #%d to 'write' (string expected, got %s)", i, t), 2)
    end
  end
  io_write(...)
end

local function require_refused(noun)
  return function(name)
    if type(name) == "string" and find(name, "^lazaret%.core%.") then
      error(format("C modules cannot be loaded by %s (%s)", noun, name), 2)
    end
    error(format("modules cannot be loaded by %s (%s)", noun, tostring(name)), 2)
  end
end

-- getmetatable as usual, except for strings: their metatable is shared by
-- the whole state and its __index is the host's string library.
local function safe_getmetatable(v)
  if type(v) == "string" then
    return false
  end
  return getmetatable(v)
end

-- userenv.new(api, noun) -> env: the environment of one user file.
-- api: table whose fields become globals of the file (they may replace a
-- standard name); noun: plural noun for error messages. Raises on misuse.
-- The message of an error object user code raised (a report, a suite's
-- check): its __tostring is the user's code, so it runs protected, and
-- may give no string.
function M.error_text(e)
  if type(e) == "string" then
    return e
  end
  local ok, s = pcall(tostring, e)
  if ok and type(s) == "string" then
    return s
  end
  return format("(error object is a %s value)", type(e))
end

function M.new(api, noun)
  if type(api) ~= "table" then
    error("userenv.new: api must be a table", 2)
  end
  if type(noun) ~= "string" or noun == "" then
    error("userenv.new: noun must be a non-empty string", 2)
  end
  local env = {}
  for _, name in ipairs(SAFE_BASE) do
    env[name] = G[name]
  end
  env.getmetatable = safe_getmetatable
  env._VERSION = VERSION
  for _, name in ipairs(M.REFUSED_BASE) do
    env[name] = refusal(name, noun)
  end
  env.require = require_refused(noun)
  for lib, t in pairs(COPIED) do
    local copy = {}
    for k, v in pairs(t) do
      if not (NOT_COPIED[lib] and NOT_COPIED[lib][k]) then
        copy[k] = v
      end
    end
    env[lib] = copy
  end

  local os_fields = {}
  for _, name in ipairs(M.OS_KEPT) do
    os_fields[name] = os[name]
  end
  for _, name in ipairs(M.REFUSED_OS) do
    os_fields[name] = refusal("os." .. name, noun)
  end
  env.os = guarded("os", os_fields, noun)

  local io_fields = { write = write_stdout }
  for _, name in ipairs(M.REFUSED_IO) do
    io_fields[name] = refusal("io." .. name, noun)
  end
  env.io = guarded("io", io_fields, noun)

  env.debug = guarded("debug", {}, noun)
  env.package = guarded("package", {}, noun)

  for k, v in pairs(api) do
    env[k] = v
  end
  env._G = env
  return env
end

return M
