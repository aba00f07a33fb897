-- busted spec for bindings/store/l_state.c (lazaret.core.state): the
-- arguments state.inspect takes, on a configuration in a temporary
-- directory (no image is prepared: nothing here gets that far).
require("lazaret_spec")
local config = require("lazaret.core.config")
local state = require("lazaret.core.state")
local errno = require("lazaret.core.errno")

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -m 0700 " .. p))
  return p
end

describe("lazaret.core.state", function()
  local dir, cfg

  before_each(function()
    dir = tmpdir()
    assert(os.execute("mkdir " .. dir .. "/ws"))
    local f = assert(io.open(dir .. "/c.toml", "w"))
    f:write('version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n'
      .. '[profiles.dev]\nimage = "docker://registry.invalid/lazaret/never-prepared:1"\n'
      .. 'persistent_dirs = ["/usr/local"]\n')
    f:close()
    assert(os.execute("chmod 0600 " .. dir .. "/c.toml"))
    cfg = assert(config.load({ config = dir .. "/c.toml", profile = "dev", workspace = dir .. "/ws" }))
  end)

  after_each(function()
    if cfg then cfg:close() end
    cfg = nil
    collectgarbage()
    os.execute("rm -rf " .. dir)
  end)

  describe("inspect", function()
    -- Spec 3.9: a State Anchor is named by its absolute persistent path;
    -- "" was read past its end, "xusr/local" taken for /usr/local.
    it("returns nil, msg, EINVAL for a path that is not absolute", function()
      for _, p in ipairs({ "", "xusr/local", "usr/local" }) do
        local r, msg, code = state.inspect(cfg, { paths = { "/usr/local", p } })
        assert.is_nil(r)
        assert.are.equal(errno.EINVAL, code)
        assert.are.equal("state inspect '" .. p .. "': not an absolute path", msg)
      end
    end)

    -- Every persistent directory of the profile, not the first 64: the
    -- configuration allows 256.
    it("inspects every persistent directory of a profile listing 70", function()
      local dirs = {}
      for i = 1, 70 do dirs[i] = '"/p' .. i .. '"' end
      local f = assert(io.open(dir .. "/c.toml", "w"))
      f:write('version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n'
        .. '[profiles.dev]\nimage = "docker://registry.invalid/lazaret/never-prepared:1"\n'
        .. 'persistent_dirs = [' .. table.concat(dirs, ",") .. ']\n')
      f:close()
      cfg:close()
      cfg = assert(config.load({ config = dir .. "/c.toml", profile = "dev", workspace = dir .. "/ws" }))
      local s = cfg:summary()
      local made = {}
      for i = 1, 70 do made[i] = s.storage_root .. "/domains/" .. s.domain_id .. "/anchor/p" .. i .. "/upper" end
      assert(os.execute("mkdir -p " .. table.concat(made, " ")))
      local r = assert(state.inspect(cfg, {}))
      assert.are.equal(70, #r.anchors)
      assert.are.equal("/p70", r.anchors[70].path)
    end)

    it("raises on a path that is not a string and on an unknown option", function()
      assert.has_error(function() state.inspect(cfg, { paths = { 1 } }) end)
      assert.has_error(function() state.inspect(cfg, { path = { "/usr/local" } }) end)
      assert.has_error(function() state.inspect(cfg, { paths = "/usr/local" }) end, "option 'paths' must be a table")
    end)

    it("raises on a path with a NUL byte and on a paths list with a metatable", function()
      assert.has_error(function() state.inspect(cfg, { paths = { "/usr/local\0/x" } }) end,
        "path 1 must be a string without NUL bytes")
      local proxy = setmetatable({}, { __len = function() return 1 end, __index = function() return "/usr/local" end })
      assert.has_error(function() state.inspect(cfg, { paths = proxy }) end,
        "option 'paths' must be a plain table (it has a metatable)")
    end)
  end)

  describe("remove", function()
    it("raises on a Domain ID with a NUL byte instead of reading a shorter one", function()
      local id = cfg:summary().domain_id
      assert.error_matches(function() state.remove_check(cfg, id .. "\0x") end, "contains a NUL byte")
      assert.error_matches(function() state.remove(cfg, id .. "\0x") end, "contains a NUL byte")
    end)
  end)
end)
