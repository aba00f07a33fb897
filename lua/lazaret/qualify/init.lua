-- `lazaret qualify [--json] [--profile P] [--config FILE] [SUITE.lua ...]`:
-- release qualification on this host (spec OR-4). The built-in suites
-- (lazaret.qualify.builtin) check the host, then launch real sandboxes of
-- the profile in a scratch workspace: the runsc launch path, the workspace
-- filesystem, the rootless network, Git Sentry and the terminal. Users add
-- suites as Lua files with the same API (docs/qualify.md):
--
--   suite(name)                 names the file's suite (default: its name)
--   check(name, fn)             registers a check; fn(t) runs it
--   t:run(argv [, {terminal=, timeout=}]) -> {status=, output=}
--                               argv runs in the profile's sandbox, with
--                               the scratch workspace at /workspace
--   t:write(rel, data)  t:read(rel)  t:mkdir(rel)  t:missing(rel)
--                               the scratch workspace, from the host
--   t:expect(cond, reason)      fails the check unless cond
--   t:fail(reason)  t:skip(reason)
--   t.host                      the host checks as `lazaret diag` judges them
--
-- A check passes when fn returns; each result has its duration. Exit
-- status 0 when no check failed, 1 otherwise.
local M = {}

local setmetatable, getmetatable, error, pcall, type, ipairs, tostring =
  setmetatable, getmetatable, error, pcall, type, ipairs, tostring
local format, concat = string.format, table.concat

M.SCRATCH = "qualify-workspace"
M.DEFAULT_PROFILE = "default"
M.RUN_TIMEOUT_S = 180

-- A check's outcome raised from inside fn.
local OUTCOME = {}

-- The text of an error a user's check or suite raised (its __tostring is
-- the user's code).
local error_text = require("lazaret.userenv").error_text

local function outcome(status, reason)
  error(setmetatable({ status = status, reason = tostring(reason) }, OUTCOME), 0)
end

-- ---- the check context -------------------------------------------------

-- What a check's context reaches (the session module, the scratch
-- workspace's handle) is kept here, not in the context: a user suite
-- holds t, and nothing reachable from t may run anything but its checks
-- through t:run (docs/qualify.md). The metatable is hidden as well.
local env_of = setmetatable({}, { __mode = "k" })

local Context = { __metatable = false }
Context.__index = Context

function Context:fail(reason) outcome("fail", reason or "failed") end
function Context:skip(reason) outcome("skip", reason or "skipped") end

function Context:expect(cond, reason)
  if not cond then outcome("fail", reason or "expectation failed") end
  return cond
end

local function need_workspace(t)
  local env = env_of[t]
  if not env.ws then outcome("fail", "no scratch workspace: " .. (env.ws_error or "not opened")) end
  return env.ws
end

local function checked(ok, msg)
  if ok == nil then outcome("fail", msg) end
  return ok
end

function Context:write(rel, data) return checked(need_workspace(self):write(rel, data)) end
function Context:read(rel) return checked(need_workspace(self):read(rel)) end
function Context:mkdir(rel) return checked(need_workspace(self):mkdir(rel)) end
-- Whether rel cannot be read in the scratch workspace (absent, mostly).
function Context:missing(rel) return need_workspace(self):read(rel) == nil end

-- argv runs through this very lazaret executable (`lazaret run`), as a
-- developer would run it; output is standard output and error together.
function Context:run(argv, opts)
  opts = opts or {}
  if type(argv) ~= "table" or #argv == 0 then error("t:run: argv must be a non-empty list", 2) end
  local env = env_of[self]
  local ws = need_workspace(self)
  local args = { "run", "--profile", env.profile, "--workspace", ws:path() }
  if env.config then
    args[#args + 1] = "--config"
    args[#args + 1] = env.config
  end
  args[#args + 1] = "--"
  for _, a in ipairs(argv) do args[#args + 1] = a end
  local r, msg = env.session.capture(args, {
    terminal = opts.terminal == true,
    timeout_ms = (opts.timeout or M.RUN_TIMEOUT_S) * 1000,
  })
  if not r then outcome("fail", "could not run lazaret: " .. msg) end
  if r.timed_out then
    outcome("fail", format("%s timed out after %d s", argv[1], opts.timeout or M.RUN_TIMEOUT_S))
  end
  return r
end

-- ---- suites ------------------------------------------------------------

-- A suite under construction: suite(name) and check(name, fn) fill it.
function M.new_suite(name)
  local s = { name = name, checks = {} }
  s.api = {
    suite = function(n)
      if type(n) ~= "string" or n == "" then error("suite(name): name must be a non-empty string", 2) end
      s.name = n
    end,
    check = function(n, fn)
      if type(n) ~= "string" or n == "" then error("check(name, fn): name must be a non-empty string", 2) end
      if type(fn) ~= "function" then error("check(name, fn): fn must be a function", 2) end
      s.checks[#s.checks + 1] = { name = n, fn = fn }
    end,
  }
  return s
end

-- Runs every check of suite s: {name=, results={{name, status, reason, ms}}}.
-- env.blocked (a reason) skips every check of a suite that needs the
-- sandbox; the host suite never does.
function M.run_suite(s, env)
  local results = {}
  for _, c in ipairs(s.checks) do
    local started = env.now()
    local r
    if s.needs_sandbox and env.blocked then
      r = { status = "skip", reason = env.blocked }
    else
      local t = setmetatable({ host = env.host }, Context)
      env_of[t] = env
      local ok, e = pcall(c.fn, t)
      if ok then
        r = { status = "pass" }
      elseif getmetatable(e) == OUTCOME then
        r = { status = e.status, reason = e.reason }
      else
        r = { status = "fail", reason = "error: " .. error_text(e) }
      end
    end
    r.name, r.ms = c.name, env.now() - started
    results[#results + 1] = r
    if env.progress then env.progress(s.name, r) end
  end
  return { name = s.name, results = results }
end

-- ---- output -------------------------------------------------------------

function M.totals(runs)
  local t = { pass = 0, fail = 0, skip = 0 }
  for _, run in ipairs(runs) do
    for _, r in ipairs(run.results) do t[r.status] = t[r.status] + 1 end
  end
  return t
end

local MARK = { pass = "ok  ", fail = "FAIL", skip = "skip" }

-- Names and reasons carry what an image's commands printed: escaped
-- where they are shown, so they drive no terminal and stay UTF-8.
local function shown(s)
  return s and require("lazaret.core.text").escape(s)
end

function M.line(r)
  return format("  %s %s%s (%d ms)", MARK[r.status], shown(r.name), r.reason and (": " .. shown(r.reason)) or "",
                r.ms)
end

function M.summary(runs)
  local t = M.totals(runs)
  return format("qualify: %d passed, %d failed, %d skipped", t.pass, t.fail, t.skip)
end

function M.text(runs)
  local out = {}
  for _, run in ipairs(runs) do
    out[#out + 1] = shown(run.name)
    for _, r in ipairs(run.results) do out[#out + 1] = M.line(r) end
  end
  out[#out + 1] = M.summary(runs)
  return concat(out, "\n") .. "\n"
end

function M.json(runs)
  local json = require("lazaret.json")
  local t = M.totals(runs)
  local suites = {}
  for i, run in ipairs(runs) do
    local checks = {}
    for j, r in ipairs(run.results) do
      checks[j] = { name = shown(r.name), status = r.status, reason = shown(r.reason) or json.null, ms = r.ms }
    end
    suites[i] = { name = shown(run.name), checks = checks }
  end
  return json.encode({ ok = t.fail == 0, passed = t.pass, failed = t.fail, skipped = t.skip,
                       suites = suites }) .. "\n"
end

-- ---- loading user suites --------------------------------------------------

local function basename(path)
  return path:match("([^/]+)$") or path
end

-- A user suite file: its own restricted environment (lazaret.userenv:
-- no commands, no files by name, no C modules), then its checks.
function M.load_user_suite(path)
  local s = M.new_suite(basename(path))
  s.needs_sandbox = true
  local env = require("lazaret.userenv").new(s.api, "qualification suites")
  local chunk, msg = require("lazaret.core.script").load(path, "@" .. path, env)
  if not chunk then return nil, msg end
  local ok, e = pcall(chunk)
  if not ok then return nil, error_text(e) end
  return s
end

-- ---- main ---------------------------------------------------------------

function M.main(cmd)
  local platform = require("lazaret.core.platform")
  local io_write = io.write
  local env = {
    profile = cmd.profile or M.DEFAULT_PROFILE,
    config = cmd.config,
    session = require("lazaret.core.session"),
    now = platform.monotonic_ms,
  }
  if not cmd.json then
    env.progress = function(_, r) io_write(M.line(r), "\n") end
  end

  -- User suites are read before anything runs, so a broken file is
  -- reported at once rather than after minutes of launches.
  local user = {}
  for _, path in ipairs(cmd.suites or {}) do
    local s, msg = M.load_user_suite(path)
    if not s then
      local escape = require("lazaret.core.text").escape
      io.stderr:write("lazaret: error: suite ", escape(path), ": ", escape(msg), "\n")
      return 66 -- EX_NOINPUT, as for a refused report file
    end
    user[#user + 1] = s
  end

  local builtin = require("lazaret.qualify.builtin")
  local runs = {}
  local function run(s)
    if not cmd.json then io_write(shown(s.name), "\n") end
    runs[#runs + 1] = M.run_suite(s, env)
    return runs[#runs]
  end

  -- The host first: without it nothing below can launch.
  local host_run = run(builtin.host_suite(env))
  local missing = {}
  for _, r in ipairs(host_run.results) do
    if r.status == "fail" then missing[#missing + 1] = r.name end
  end
  if #missing > 0 then
    env.blocked = "the host is not ready (" .. concat(missing, ", ") .. ")"
  else
    local ws, msg = require("lazaret.core.scratch").open(M.SCRATCH)
    env.ws, env.ws_error = ws, msg
    if not ws then
      -- A failure of its own: the skipped checks below test nothing.
      env.blocked = "no scratch workspace: " .. msg
      local s = M.new_suite("scratch workspace")
      s.api.check("opened", function(t) t:fail(env.blocked) end)
      run(s)
    end
  end
  run(builtin.sandbox_suite(env))
  for _, s in ipairs(user) do run(s) end
  if env.ws then env.ws:close() end

  if cmd.json then
    io_write(M.json(runs))
  else
    io_write(M.summary(runs), "\n")
  end
  return M.totals(runs).fail == 0 and 0 or 1
end

return M
