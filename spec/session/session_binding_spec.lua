-- busted spec for bindings/session/l_session.c (lazaret.core.session): the
-- argument checks of both ends. No call here reaches a Host Coordinator:
-- session.run is only called with arguments it must refuse before
-- connecting, and session.serve only with handles it must refuse.
-- Needs the test module (busted --cpath='<builddir>/?.so'); the closed and
-- unpublished coordinator cases need XDG_RUNTIME_DIR and runsc, like
-- spec/runtime/coordinator_binding_spec.lua.
require("lazaret_spec")
local session = require("lazaret.core.session")
local config = require("lazaret.core.config")
local coordinator = require("lazaret.core.coordinator")
local dstore = require("lazaret.core.dstore")
local errno = require("lazaret.core.errno")

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -m 0700 " .. p))
  return p
end

local function write(path, text, mode)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  assert(os.execute("chmod " .. (mode or "0600") .. " " .. path))
end

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

describe("lazaret.core.session", function()
  local dir, cfg, runtime_domain

  before_each(function()
    dir = tmpdir()
    assert(os.execute("mkdir " .. dir .. "/ws"))
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n'
      .. '[profiles.dev]\nimage = "docker://registry.invalid/lazaret/never-prepared:1"\n')
    cfg = assert(config.load({ config = dir .. "/c.toml", profile = "dev", workspace = dir .. "/ws" }))
    local s = cfg:summary()
    runtime_domain = s.runtime_root .. "/domains/" .. s.domain_id
  end)

  after_each(function()
    cfg = nil
    collectgarbage()
    collectgarbage()
    os.execute("rm -rf " .. dir .. " " .. runtime_domain)
  end)

  it("exports the documented functions only", function()
    local names = {}
    for k, v in pairs(session) do
      names[#names + 1] = k .. ":" .. type(v)
    end
    table.sort(names)
    assert.are.same({ "capture:function", "interactive:function", "run:function", "serve:function" }, names)
  end)

  it("interactive() returns a boolean", function()
    assert.are.equal("boolean", type(session.interactive()))
    -- Ignores arguments.
    assert.are.equal("boolean", type(session.interactive("x")))
  end)

  describe("run", function()
    it("raises without an open configuration", function()
      assert.has_error(function() session.run() end)
      assert.has_error(function() session.run(nil, { argv = { "true" } }) end)
      assert.has_error(function() session.run(dir .. "/c.toml", { argv = { "true" } }) end)
      assert.has_error(function() session.run({}, { argv = { "true" } }) end)
      local closed = assert(config.load({ config = dir .. "/c.toml" }))
      closed:close()
      assert.error_matches(function() session.run(closed, { argv = { "true" } }) end,
        "attempt to use a closed configuration")
    end)

    it("raises without an options table", function()
      assert.has_error(function() session.run(cfg) end)
      assert.has_error(function() session.run(cfg, "true") end)
      assert.error_matches(function() session.run(cfg, { "true" }) end, "unknown option 'number'")
    end)

    it("raises when argv is missing or not a table", function()
      assert.error_matches(function() session.run(cfg, {}) end, "option 'argv' must be a table")
      assert.error_matches(function() session.run(cfg, { argv = "true" }) end, "option 'argv' must be a table")
      assert.error_matches(function() session.run(cfg, { terminal = true }) end, "option 'argv' must be a table")
    end)

    it("raises when argv is empty or too long", function()
      assert.error_matches(function() session.run(cfg, { argv = {} }) end, "option 'argv' needs 1 to 4096 strings")
      local long = {}
      for i = 1, 4097 do
        long[i] = "x"
      end
      assert.error_matches(function() session.run(cfg, { argv = long }) end, "option 'argv' needs 1 to 4096 strings")
    end)

    it("raises when an argv element is not a string", function()
      assert.error_matches(function() session.run(cfg, { argv = { 1 } }) end, "argv%[1%] must be a string")
      assert.error_matches(function() session.run(cfg, { argv = { "echo", 2 } }) end, "argv%[2%] must be a string")
      assert.error_matches(function() session.run(cfg, { argv = { "echo", {} } }) end, "argv%[2%] must be a string")
      assert.error_matches(function() session.run(cfg, { argv = { "echo", true } }) end, "argv%[2%] must be a string")
      assert.error_matches(function() session.run(cfg, { argv = { "a", "b", false, "d" } }) end,
        "argv%[3%] must be a string")
    end)

    it("raises on an argv or options table with a metatable, or an argv string with a NUL", function()
      local proxy = setmetatable({}, { __len = function() return 1 end, __index = function() return "true" end })
      assert.error_matches(function() session.run(cfg, { argv = proxy }) end,
        "option 'argv' must be a plain table %(it has a metatable%)")
      assert.error_matches(function() session.run(cfg, setmetatable({ argv = { "true" } }, {})) end,
        "the options must be a plain table")
      assert.error_matches(function() session.run(cfg, { argv = { "echo", "a\0b" } }) end,
        "argv%[2%] must be a string without NUL bytes")
      assert.error_matches(function() session.run(cfg, { argv = { "true" }, config = "/c\0x" }) end,
        "option 'config' contains a NUL byte")
    end)

    it("raises on unknown option keys and a config that is not a string", function()
      assert.error_matches(function() session.run(cfg, { argv = { "true" }, bogus = 1 }) end,
        "unknown option 'bogus'")
      assert.error_matches(function() session.run(cfg, { argv = { "true" }, Argv = { "true" } }) end,
        "unknown option 'Argv'")
      assert.error_matches(function() session.run(cfg, { argv = { "true" }, [1] = "x" }) end,
        "unknown option 'number'")
      assert.error_matches(function() session.run(cfg, { argv = { "true" }, config = 1 }) end,
        "option 'config' must be a string")
      assert.error_matches(function() session.run(cfg, { argv = { "true" }, config = {} }) end,
        "option 'config' must be a string")
    end)
  end)

  describe("serve", function()
    it("raises on anything but a coordinator handle", function()
      assert.has_error(function() session.serve() end)
      assert.has_error(function() session.serve(nil) end)
      assert.has_error(function() session.serve("hc") end)
      assert.has_error(function() session.serve({}) end)
      assert.has_error(function() session.serve(io.stdout) end)
      assert.has_error(function() session.serve(cfg) end)
    end)

    it("raises on a coordinator view and on a closed coordinator", function()
      local hc = assert(coordinator.open(cfg))
      assert.has_error(function() session.serve(dstore.of(hc)) end)
      hc:close()
      assert.error_matches(function() session.serve(hc) end, "attempt to use a closed coordinator")
    end)

    it("raises without an escalation route function", function()
      local hc = assert(coordinator.open(cfg))
      assert.error_matches(function() session.serve(hc) end, "function expected")
      assert.error_matches(function() session.serve(hc, "prompt") end, "function expected")
      hc:close()
    end)

    it("returns nil, msg, EPROTO for a generation that was not published", function()
      local route = function() return "deny", "" end
      local hc = assert(coordinator.open(cfg))
      local r, msg, code = session.serve(hc, route)
      assert.is_nil(r)
      assert.matches("serving needs a published generation", msg)
      assert.are.equal(errno.EPROTO, code)
      assert.is_true(hc:recovered())
      assert.is_true(hc:begin())
      r, msg, code = session.serve(hc, route)
      assert.is_nil(r)
      assert.matches("serving needs a published generation", msg)
      assert.are.equal(errno.EPROTO, code)
      hc:close()
    end)
  end)

  it("leaks no globals", function()
    local before = globals()
    package.loaded["lazaret.core.session"] = nil
    local fresh = require("lazaret.core.session")
    package.loaded["lazaret.core.session"] = session
    fresh.interactive()
    pcall(fresh.run, cfg, { argv = {} })
    pcall(fresh.serve, {})
    assert.are.same(before, globals())
  end)
end)
