-- busted spec for lua/lazaret/qualify (the runner and the check API) with
-- a fake session and scratch workspace: the real launches are the e2e
-- tests (tests/e2e/test_qualify.sh).
require("lazaret_spec")
local qualify = require("lazaret.qualify")

-- A clock that advances 5 ms per reading.
local function clock()
  local t = 1000
  return function()
    t = t + 5
    return t
  end
end

local function fake_env(captures)
  local calls = {}
  local files = {}
  return {
    profile = "dev",
    config = "/cfg.toml",
    now = clock(),
    calls = calls,
    ws = {
      path = function() return "/scratch/ws" end,
      write = function(_, rel, data) files[rel] = data; return true end,
      read = function(_, rel)
        if files[rel] then return files[rel] end
        return nil, "'" .. rel .. "': No such file or directory", 2
      end,
      mkdir = function() return true end,
    },
    session = {
      capture = function(args, opts)
        calls[#calls + 1] = { args = args, opts = opts }
        local c = table.remove(captures, 1)
        if c == nil then return nil, "no more fakes", 5 end
        return c
      end,
    },
  }
end

local function suite_of(checks, needs_sandbox)
  local s = qualify.new_suite("s")
  s.needs_sandbox = needs_sandbox
  for _, c in ipairs(checks) do s.api.check(c[1], c[2]) end
  return s
end

describe("lazaret.qualify", function()
  describe("run_suite", function()
    it("records pass, fail, skip and errors with their reasons and durations", function()
      local s = suite_of({
        { "passes", function() end },
        { "fails", function(t) t:fail("because") end },
        { "expects", function(t) t:expect(1 == 2, "one is not two") end },
        { "skips", function(t) t:skip("not here") end },
        { "raises", function() error("boom", 0) end },
        { "raises a table", function() error({ 1 }) end },
      })
      local run = qualify.run_suite(s, fake_env({}))
      assert.are.equal("s", run.name)
      local got = {}
      for i, r in ipairs(run.results) do
        got[i] = { r.name, r.status, r.reason }
        assert.are.equal(5, r.ms)
      end
      assert.are.same({
        { "passes", "pass", nil },
        { "fails", "fail", "because" },
        { "expects", "fail", "one is not two" },
        { "skips", "skip", "not here" },
        { "raises", "fail", "error: boom" },
      }, { got[1], got[2], got[3], got[4], got[5] })
      assert.are.equal("fail", got[6][2])
      assert.matches("^error: table: ", got[6][3])
    end)

    it("skips a sandbox suite's checks once the environment is blocked", function()
      local ran = {}
      local env = fake_env({})
      local s = suite_of({
        { "first", function() ran[#ran + 1] = "first"; env.blocked = "the profile does not resolve" end },
        { "second", function() ran[#ran + 1] = "second" end },
      }, true)
      local run = qualify.run_suite(s, env)
      assert.are.same({ "first" }, ran)
      assert.are.equal("pass", run.results[1].status)
      assert.are.same({ "skip", "the profile does not resolve" },
        { run.results[2].status, run.results[2].reason })
    end)

    it("never skips the host suite", function()
      local env = fake_env({})
      env.blocked = "anything"
      local run = qualify.run_suite(suite_of({ { "kernel", function() end } }, false), env)
      assert.are.equal("pass", run.results[1].status)
    end)

    it("reports progress per check", function()
      local env = fake_env({})
      local seen = {}
      env.progress = function(name, r) seen[#seen + 1] = name .. ":" .. r.name .. ":" .. r.status end
      qualify.run_suite(suite_of({ { "a", function() end }, { "b", function(t) t:skip("x") end } }), env)
      assert.are.same({ "s:a:pass", "s:b:skip" }, seen)
    end)
  end)

  describe("t:run", function()
    it("runs `lazaret run` for the profile in the scratch workspace", function()
      local env = fake_env({ { status = 0, output = "hi\n", timed_out = false, truncated = false } })
      local r
      qualify.run_suite(suite_of({ { "c", function(t) r = t:run({ "/bin/sh", "-c", "echo hi" }, { terminal = true, timeout = 3 }) end } }), env)
      assert.are.same({ "run", "--profile", "dev", "--workspace", "/scratch/ws", "--config", "/cfg.toml",
        "--", "/bin/sh", "-c", "echo hi" }, env.calls[1].args)
      assert.are.same({ terminal = true, timeout_ms = 3000 }, env.calls[1].opts)
      assert.are.equal("hi\n", r.output)
    end)

    it("leaves --config out when none was given", function()
      local env = fake_env({ { status = 0, output = "", timed_out = false } })
      env.config = nil
      qualify.run_suite(suite_of({ { "c", function(t) t:run({ "true" }) end } }), env)
      assert.are.same({ "run", "--profile", "dev", "--workspace", "/scratch/ws", "--", "true" }, env.calls[1].args)
      assert.are.equal(qualify.RUN_TIMEOUT_S * 1000, env.calls[1].opts.timeout_ms)
    end)

    it("fails the check on a timeout or when lazaret could not run", function()
      local env = fake_env({ { status = false, output = "", timed_out = true } })
      local run = qualify.run_suite(suite_of({
        { "slow", function(t) t:run({ "sleep", "9" }, { timeout = 1 }) end },
        { "cannot", function(t) t:run({ "true" }) end },
      }), env)
      assert.are.same({ "fail", "sleep timed out after 1 s" }, { run.results[1].status, run.results[1].reason })
      assert.are.same({ "fail", "could not run lazaret: no more fakes" },
        { run.results[2].status, run.results[2].reason })
    end)

    it("raises on a malformed argv (a suite bug, reported as an error)", function()
      local run = qualify.run_suite(suite_of({ { "bad", function(t) t:run({}) end } }), fake_env({}))
      assert.are.equal("fail", run.results[1].status)
      assert.matches("argv must be a non%-empty list", run.results[1].reason)
    end)

    it("turns a scratch failure into the check's reason", function()
      local run = qualify.run_suite(suite_of({ { "read", function(t) t:read("nope") end } }), fake_env({}))
      assert.are.same({ "fail", "'nope': No such file or directory" }, { run.results[1].status, run.results[1].reason })
    end)

    it("fails without a scratch workspace", function()
      local env = fake_env({})
      env.ws, env.ws_error = nil, "HOME unset"
      local run = qualify.run_suite(suite_of({ { "w", function(t) t:write("a", "b") end } }), env)
      assert.are.same({ "fail", "no scratch workspace: HOME unset" }, { run.results[1].status, run.results[1].reason })
    end)
  end)

  describe("suites", function()
    it("refuses check and suite arguments that are not what they must be", function()
      local s = qualify.new_suite("x")
      assert.has_error(function() s.api.check("", function() end) end)
      assert.has_error(function() s.api.check("n", "not a function") end)
      assert.has_error(function() s.api.suite(42) end)
      s.api.suite("renamed")
      assert.are.equal("renamed", s.name)
    end)
  end)

  describe("output", function()
    local runs = {
      { name = "host", results = { { name = "kernel", status = "pass", ms = 1 } } },
      { name = "sandbox", results = {
        { name = "runsc launch", status = "fail", reason = "status 69", ms = 120 },
        { name = "terminal", status = "skip", reason = "blocked", ms = 0 },
      } },
    }

    it("counts", function()
      assert.are.same({ pass = 1, fail = 1, skip = 1 }, qualify.totals(runs))
      assert.are.equal("qualify: 1 passed, 1 failed, 1 skipped", qualify.summary(runs))
    end)

    it("prints one line per check under its suite", function()
      assert.are.equal(table.concat({
        "host",
        "  ok   kernel (1 ms)",
        "sandbox",
        "  FAIL runsc launch: status 69 (120 ms)",
        "  skip terminal: blocked (0 ms)",
        "qualify: 1 passed, 1 failed, 1 skipped",
      }, "\n") .. "\n", qualify.text(runs))
    end)

    it("prints the documented JSON (keys in byte order)", function()
      assert.are.equal('{"failed":1,"ok":false,"passed":1,"skipped":1,"suites":['
        .. '{"checks":[{"ms":1,"name":"kernel","reason":null,"status":"pass"}],"name":"host"},'
        .. '{"checks":[{"ms":120,"name":"runsc launch","reason":"status 69","status":"fail"},'
        .. '{"ms":0,"name":"terminal","reason":"blocked","status":"skip"}],"name":"sandbox"}]}\n',
        qualify.json(runs))
    end)

    it("escapes what an image printed (controls, C1, bidi, a cut character)", function()
      local said = "status 1, output '\27]52;c;eA==\7 \194\155" .. "2J \226\128\174 \195'"
      local bad = { { name = "image \27[31mcheck", results = {
        { name = "cat \27]0;t\7", status = "fail", reason = said, ms = 3 } } } }
      local line = qualify.line(bad[1].results[1])
      assert.is_nil(line:find("[\0-\8\11-\31\127]"))
      assert.is_nil(line:find("\194[\128-\159]"))
      assert.is_nil(line:find("\226\128\174", 1, true))
      assert.truthy(line:find("\\e]52;c;eA==\\x07", 1, true))
      local json = qualify.json(bad)
      assert.is_nil(json:find("\27", 1, true))
      assert.truthy(json:find("\\u{202E}", 1, true) or json:find("\\u{202e}", 1, true))
      -- the suite's name is a file's: escaped too, and not UTF-8 is no error
      local named = { { name = "s\255\27]0;x\7.lua", results = { { name = "c", status = "pass", ms = 1 } } } }
      local ok, out = pcall(qualify.json, named)
      assert.is_true(ok, tostring(out))
      assert.is_nil(qualify.text(named):find("\27", 1, true))
      assert.is_nil(qualify.text(named):find("\255", 1, true))
    end)

    it("records a check whose error cannot be turned into text as failed", function()
      local odd = setmetatable({}, { __tostring = function() return {} end })
      local run = qualify.run_suite(suite_of({ { "odd", function() error(odd) end } }), fake_env({}))
      assert.are.equal("fail", run.results[1].status)
      assert.matches("error object is a table value", run.results[1].reason)
    end)
  end)

  describe("user suites (lazaret.userenv, lazaret.core.script)", function()
    local dir
    before_each(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -m 0700 '" .. dir .. "'"))
    end)
    after_each(function()
      os.execute("rm -rf '" .. dir .. "'")
    end)

    local function put(name, code)
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(code)
      f:close()
      return dir .. "/" .. name
    end

    it("loads a suite file whose checks cannot reach the host", function()
      local s = assert(qualify.load_user_suite(put("u.lua", table.concat({
        "suite('mine')",
        "check('exec', function(t) os.execute('touch " .. dir .. "/pwned') end)",
        "check('C module', function(t) require('lazaret.core.probe') end)",
        "check('load', function(t) load('return 1') end)",
        "check('fine', function(t) t:expect(('ab'):rep(2) == 'abab', 'rep') end)",
      }, "\n"))))
      assert.are.equal("mine", s.name)
      assert.is_true(s.needs_sandbox)
      local run = qualify.run_suite(s, fake_env({}))
      local r = run.results
      assert.are.same({ "fail", "fail", "fail", "pass" }, { r[1].status, r[2].status, r[3].status, r[4].status })
      assert.matches("os.execute is not available to qualification suites", r[1].reason, 1, true)
      assert.matches("C modules cannot be loaded by qualification suites (lazaret.core.probe)", r[2].reason, 1, true)
      assert.matches("load is not available to qualification suites", r[3].reason, 1, true)
      assert.is_nil(io.open(dir .. "/pwned"))
    end)

    it("gives a suite's checks no way to the session module, the scratch handle or the context's metatable",
      function()
      local s = assert(qualify.load_user_suite(put("reach.lua", table.concat({
        "check('env', function(t) t:expect(t.env == nil, 'an env in the context') end)",
        "check('metatable', function(t) t:expect(getmetatable(t) == false, 'the metatable is reachable') end)",
        "check('capture', function(t) t.env.session.capture({ 'state', 'list' }) end)",
      }, "\n"))))
      local env = fake_env({ { status = 0, output = "" } })
      local run = qualify.run_suite(s, env)
      local r = run.results
      assert.are.same({ "pass", "pass", "fail" }, { r[1].status, r[2].status, r[3].status })
      assert.are.equal(0, #env.calls)
    end)

    it("refuses a missing, malformed or symlinked suite file with a message", function()
      local s, msg = qualify.load_user_suite(dir .. "/missing.lua")
      assert.is_nil(s)
      assert.matches("No such file", msg)
      s, msg = qualify.load_user_suite(put("bad.lua", "check('x', function(t) end"))
      assert.is_nil(s)
      assert.matches("bad%.lua:1: ", msg)
      assert(os.execute("ln -s '" .. dir .. "/bad.lua' '" .. dir .. "/link.lua'"))
      s, msg = qualify.load_user_suite(dir .. "/link.lua")
      assert.is_nil(s)
      assert.matches("symbolic link", msg)
      s, msg = qualify.load_user_suite(put("top.lua", "os.getenv('HOME')"))
      assert.is_nil(s)
      assert.matches("os.getenv is not available to qualification suites", msg, 1, true)
    end)
  end)
end)
