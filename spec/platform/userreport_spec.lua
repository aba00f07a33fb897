-- busted spec for lua/lazaret/platform/userreport.lua (`lazaret diag
-- --report FILE.lua`) with a fake probe of lazaret.core.probe's shape: the
-- report's API, its verdict and every exit status. The e2e tests
-- (tests/e2e/test_cli.sh) run reports through the real binary.
require("lazaret_spec")
local userreport = require("lazaret.platform.userreport")
local diag = require("lazaret.platform.diag")
local report = require("lazaret.platform.report")

local ERRNO = { EACCES = 13, EINVAL = 22, ENODEV = 19, ENOENT = 2, EPERM = 1 }

-- A healthy fake probe; kernel() counts its calls in calls.kernel.
local function fake_probe(calls)
  return {
    errno = ERRNO,
    tools = { "runsc", "slirp4netns" },
    kernel = function()
      calls.kernel = (calls.kernel or 0) + 1
      return { release = "6.18.44", machine = "x86_64", major = 6, minor = 18 }
    end,
    identity = function() return { uid = 1000, gid = 1000, user = "alice" } end,
    subids = function() return { { start = 100000, count = 65536 } } end,
    subid_range = function() return { start = 100000, count = 65536 } end,
    locate = function(name) return "/usr/bin/" .. name end,
    file = function()
      return { type = "file", mode = 2541, uid = 0, gid = 0, size = 1, setuid = true, setgid = false }
    end,
    tool = function(name) return { path = "/usr/bin/" .. name, version = name .. " version 20240729" } end,
    device_rw = function() return true end,
    userns = function() return true end,
    descriptors = function() return { soft = 20000, hard = 20000, dcache_cap = 5000 } end,
    egress = function() return { tcp_pressure = 1 << 30, max_connections = 73, upstream_rcvbuf = 1 << 20 } end,
    memory = function() return { budget = 8 << 30, chunk = 32 << 20 } end,
    library = function(name) return { soname = name .. ".so" } end,
    runtime_root = function() return { path = "/run/user/1000/lazaret", exists = false, creatable = true } end,
    landlock = function() return 7 end,
  }
end

describe("lazaret.platform.userreport", function()
  local dir, calls, probe, out, err
  local real_print, real_stderr = print, io.stderr

  local function put(name, code)
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "w"))
    f:write(code)
    f:close()
    return path
  end

  local function run(path)
    return userreport.run(path, { probe = probe, version = "9.9.9" })
  end

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -m 0700 '" .. dir .. "'"))
    calls, out, err = {}, {}, {}
    probe = fake_probe(calls)
    -- The report's print is the host's, captured when its environment is
    -- built; the refusals go to io.stderr.
    _G.print = function(...)
      local t = table.pack(...)
      for i = 1, t.n do t[i] = tostring(t[i]) end
      out[#out + 1] = table.concat(t, "\t")
    end
    io.stderr = { write = function(self, ...) for _, s in ipairs({ ... }) do err[#err + 1] = s end return self end }
  end)

  after_each(function()
    _G.print, io.stderr = real_print, real_stderr
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("runs examples/report.lua: one line, ready, exit 0", function()
    local src = os.getenv("LZ_SOURCE_DIR") or "."
    assert.are.equal(0, run(src .. "/examples/report.lua"))
    assert.are.same({ "lazaret 9.9.9: alice@6.18.44: ready" }, out)
    assert.are.same({}, err)
  end)

  it("exits 1 when the report returns false, 0 for true or nothing", function()
    assert.are.equal(1, run(put("f.lua", "return false")))
    assert.are.equal(0, run(put("t.lua", "return true")))
    assert.are.equal(0, run(put("n.lua", "print('x')")))
    assert.are.same({ "x" }, out)
  end)

  it("gets the API as the global lazaret and as its first argument", function()
    local path = put("api.lua", [[
      local lz = ...
      assert(lz == lazaret)
      print(lz.version, type(lz.probe.kernel), type(lz.checks), type(lz.text), type(lz.json))
      print(lz.probe.kernel().release, lz.probe.errno.ENOENT, lz.probe.tools[1])
      print(lz.json({ b = 1, a = { "x" } }))
    ]])
    assert.are.equal(0, run(path))
    assert.are.same({ "9.9.9\tfunction\tfunction\tfunction\tfunction", "6.18.44\t2\trunsc",
      '{"a":["x"],"b":1}' }, out)
  end)

  it("gives the checks diag judges, probed once, as a fresh copy each call", function()
    local path = put("checks.lua", [[
      local a = lazaret.checks()
      a[1].status = "forged"
      a[2] = nil
      local b = lazaret.checks()
      print(#b, b[1].name, b[1].status)
      local _ = lazaret.text(b)
    ]])
    assert.are.equal(0, run(path))
    local want = diag.collect(fake_probe({}))
    assert.are.equal(#want .. "\tkernel\tok", out[1])
    assert.are.equal(1, calls.kernel)
  end)

  it("formats with diag's text report", function()
    local path = put("text.lua", "print(lazaret.text(lazaret.checks()))")
    assert.are.equal(0, run(path))
    assert.are.equal(report.text(diag.collect(fake_probe({}))), out[1])
  end)

  it("cannot change the probe the host uses", function()
    local path = put("mutate.lua", [[
      lazaret.probe.errno.ENOENT = 99
      lazaret.probe.kernel = function() return { release = "forged" } end
      lazaret.probe.tools[1] = "sh"
    ]])
    assert.are.equal(0, run(path))
    assert.are.equal(2, probe.errno.ENOENT)
    assert.are.equal("runsc", probe.tools[1])
    assert.are.equal("6.18.44", probe.kernel().release)
  end)

  it("exits 65 naming what is not available: os.execute, io.open, C modules", function()
    local cases = {
      { "os.execute('touch " .. dir .. "/pwned')", "os.execute is not available to diag reports" },
      { "io.open('" .. dir .. "/pwned', 'w')", "io.open is not available to diag reports" },
      { "require('lazaret.core.probe')", "C modules cannot be loaded by diag reports (lazaret.core.probe)" },
      { "load('return 1')", "load is not available to diag reports" },
      { "return debug.getinfo(1)", "debug.getinfo is not available to diag reports" },
    }
    for i, case in ipairs(cases) do
      err = {}
      local path = put("bad" .. i .. ".lua", case[1])
      assert.are.equal(65, run(path), case[1])
      local msg = table.concat(err)
      assert.is_truthy(msg:find("lazaret: error: report " .. path .. ": ", 1, true), msg)
      assert.is_truthy(msg:find(case[2], 1, true), msg)
    end
    assert.is_nil(io.open(dir .. "/pwned"))
  end)

  it("exits 65 when the report raises or returns something else", function()
    assert.are.equal(65, run(put("e.lua", "error('broken on purpose')")))
    assert.matches("e%.lua:1: broken on purpose", table.concat(err))
    err = {}
    assert.are.equal(65, run(put("o.lua", "error(setmetatable({}, { __tostring = function() error('x') end }))")))
    assert.matches("error object is a table value", table.concat(err))
    err = {}
    assert.are.equal(65, run(put("s.lua", "return 'ready'")))
    assert.matches("returned a string", table.concat(err))
  end)

  it("exits 66 for a file it cannot read or that is not Lua source", function()
    local target = put("real.lua", "return true")
    local link = dir .. "/link.lua"
    assert(os.execute("ln -s '" .. target .. "' '" .. link .. "'"))
    local cases = {
      { dir .. "/missing.lua", "No such file" },
      { link, "symbolic link" },
      { dir, "not a regular file" },
      { put("syntax.lua", "return 1 +"), "syntax%.lua:1: " },
      { put("bin.lua", string.dump(function() end)), "precompiled" },
    }
    for _, case in ipairs(cases) do
      err = {}
      assert.are.equal(66, run(case[1]), case[1])
      assert.matches(case[2], table.concat(err))
    end
    assert.are.same({}, out)
  end)

  it("is what diag.run runs for opts.report", function()
    assert.are.equal(1, diag.run({ report = put("f.lua", "return false"), probe = probe }))
    assert.has_error(function() diag.run({ report = "x.lua", json = true }) end)
    assert.has_error(function() diag.run({ report = 1 }) end)
  end)

  it("raises on misuse", function()
    assert.has_error(function() userreport.run(nil) end)
    assert.has_error(function() userreport.run("") end)
    assert.has_error(function() userreport.run("x.lua", { nope = true }) end)
    assert.has_error(function() userreport.run("x.lua", { probe = 1 }) end)
    assert.has_error(function() userreport.api(nil) end)
  end)
end)
