-- lazaret.core.config binding: the handle contract of docs/architecture.md.
-- Needs XDG_RUNTIME_DIR set to a private directory (scripts/test.sh does).
require("lazaret_spec")
local config = require("lazaret.core.config")

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

describe("lazaret.core.config", function()
  local dir
  before_each(function()
    dir = tmpdir()
  end)
  after_each(function()
    os.execute("rm -rf " .. dir)
  end)

  it("needs XDG_RUNTIME_DIR from the harness", function()
    assert.is_string(os.getenv("XDG_RUNTIME_DIR"))
  end)

  it("loads a valid file and summarizes it without a profile", function()
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir
      .. '/data"\n[profiles.dev]\nimage = "oci:/x"\n')
    local cfg = assert(config.load({ config = dir .. "/c.toml" }))
    local s = cfg:summary()
    assert.equal(dir .. "/c.toml", s.source)
    assert.equal(dir .. "/data", s.storage_root)
    assert.equal(1, s.profiles)
    assert.is_nil(s.domain_id)
    cfg:close()
  end)

  it("resolves a profile for a workspace", function()
    local ws = dir .. "/ws"
    os.execute("mkdir " .. ws)
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir
      .. '/data"\n[profiles.dev]\nimage = "oci:/x"\n')
    local cfg <close> = assert(config.load({ config = dir .. "/c.toml", profile = "dev",
      workspace = ws }))
    local s = cfg:summary()
    assert.equal("dev", s.profile)
    assert.equal(ws, s.workspace)
    assert.matches("^%x+$", s.domain_id)
    assert.equal(64, #s.fingerprint)
  end)

  it("returns nil, a message and errno when the file is refused", function()
    write(dir .. "/c.toml", "version = 1\n", "0620")
    local cfg, msg, errno = config.load({ config = dir .. "/c.toml" })
    assert.is_nil(cfg)
    assert.matches("group or other write", msg)
    assert.is_number(errno)
    cfg, msg, errno = config.load({ config = dir .. "/missing.toml" })
    assert.is_nil(cfg)
    assert.matches("No such file", msg)
    assert.equal(2, errno)
  end)

  it("raises on misuse: bad argument types and unknown option keys", function()
    assert.has_error(function() config.load() end)
    assert.has_error(function() config.load("path") end)
    assert.has_error(function() config.load({ config = 1 }) end)
    assert.has_error(function() config.load({ confg = "/x" }) end, "unknown option 'confg'")
    assert.has_error(function() config.profile_name_valid() end)
  end)

  -- Option tables are read raw, as they are: a proxy could hand C a fresh
  -- string that nothing keeps alive once it is popped (a use after free).
  it("raises on an options table with a metatable", function()
    local calls = 0
    local proxy = setmetatable({}, { __index = function(_, k)
      calls = calls + 1
      collectgarbage()
      if k == "config" then return dir .. "/" .. string.rep("x", 200) .. tostring(math.random()) end
    end })
    assert.has_error(function() config.load(proxy) end, "the options must be a plain table (it has a metatable)")
    assert.has_error(function() config.init(setmetatable({}, {})) end,
      "the options must be a plain table (it has a metatable)")
    assert.are.equal(0, calls)
  end)

  it("raises on a path or name with a NUL byte instead of reading a shorter one", function()
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n')
    assert.has_error(function() config.load({ config = dir .. "/c.toml\0.bak" }) end,
      "option 'config' contains a NUL byte")
    assert.has_error(function() config.load({ config = dir .. "/c.toml", workspace = dir .. "\0/x" }) end,
      "option 'workspace' contains a NUL byte")
    assert.has_error(function() config.init({ config = dir .. "/i.toml\0x" }) end,
      "option 'config' contains a NUL byte")
    assert.is_false(config.profile_name_valid("dev\0x"))
    assert.is_true(config.profile_name_valid("dev"))
  end)

  it("closes idempotently and refuses use after close", function()
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n')
    local cfg = assert(config.load({ config = dir .. "/c.toml" }))
    cfg:close()
    cfg:close()
    assert.matches("%(closed%)", tostring(cfg))
    assert.has_error(function() cfg:summary() end, "attempt to use a closed configuration")
    cfg = nil
    collectgarbage()
    collectgarbage()
  end)

  it("hides its metatable", function()
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n')
    local cfg <close> = assert(config.load({ config = dir .. "/c.toml" }))
    assert.is_false(getmetatable(cfg))
  end)

  it("init writes the given text once, 0600, and never replaces it", function()
    local path = dir .. "/init.toml"
    assert.equal(path, assert(config.init({ config = path, text = "version = 1\n# mine\n" })))
    local f = assert(io.open(path))
    assert.equal("version = 1\n# mine\n", f:read("a"))
    f:close()
    local p = assert(io.popen("stat -c %a " .. path))
    assert.equal("600", p:read("l"))
    p:close()
    local ok, msg, errno = config.init({ config = path, text = "version = 1\n" })
    assert.is_nil(ok)
    assert.matches("already exists", msg)
    assert.equal(17, errno) -- EEXIST
  end)

  it("init refuses text that is not a string, holds a NUL or is too long", function()
    local path = dir .. "/init.toml"
    assert.has_error(function() config.init({ config = path, text = 1 }) end)
    assert.has_error(function() config.init({ config = path, text = "a\0b" }) end,
      "option 'text' must be at most 65536 bytes without NUL")
    assert.has_error(function() config.init({ config = path, text = string.rep("#", 65537) }) end,
      "option 'text' must be at most 65536 bytes without NUL")
    assert.has_error(function() config.init({ config = path, txt = "" }) end)
    assert.is_nil(io.open(path))
  end)

  it("default_image names images/default under the Storage Root", function()
    local ref = assert(config.default_image())
    assert.matches("^oci:/.+/lazaret/images/default:latest$", ref)
  end)

  it("validates profile names", function()
    assert.is_true(config.profile_name_valid("dev"))
    assert.is_false(config.profile_name_valid("../x"))
  end)
end)
