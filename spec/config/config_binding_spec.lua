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

  it("validates profile names", function()
    assert.is_true(config.profile_name_valid("dev"))
    assert.is_false(config.profile_name_valid("../x"))
  end)
end)
