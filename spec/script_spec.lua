-- busted spec for bindings/fs/l_script.c (lazaret.core.script): a user's
-- Lua file compiled into the environment its caller built. The reading
-- mechanism has cmocka tests (tests/fs/test_userfile.c); the e2e tests of
-- `diag --report` (tests/e2e/test_cli.sh) and of qualify suites use both.
require("lazaret_spec")
local script = require("lazaret.core.script")
local errno = require("lazaret.core.errno")

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

describe("lazaret.core.script", function()
  local dir

  local function put(name, data)
    local path = dir .. "/" .. name
    local f = assert(io.open(path, "wb"))
    f:write(data)
    f:close()
    return path
  end

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -m 0700 '" .. dir .. "'"))
  end)

  after_each(function()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("compiles a file with the given table as its only environment", function()
    local path = put("r.lua", "x = x + 1\nreturn x, print, ...\n")
    local env = { x = 41 }
    local chunk = assert(script.load(path, "@" .. path, env))
    local x, p, arg = chunk("argument")
    assert.are.equal(42, x)
    assert.is_nil(p, "a global of the host reached the chunk")
    assert.are.equal("argument", arg)
    assert.are.equal(42, env.x)
  end)

  it("names the file in a syntax error and returns no errno", function()
    local path = put("bad.lua", "return 1 +\n")
    local chunk, msg, code = script.load(path, "@" .. path, {})
    assert.is_nil(chunk)
    assert.matches("bad%.lua:2: ", msg)
    assert.is_nil(code)
  end)

  it("refuses a precompiled chunk", function()
    local path = put("bin.lua", string.dump(function() return 1 end))
    local chunk, msg, code = script.load(path, "@" .. path, {})
    assert.is_nil(chunk)
    assert.matches("precompiled Lua chunk", msg)
    assert.is_nil(code)
  end)

  it("skips a #! line and keeps line numbers", function()
    local path = put("s.lua", "#!/usr/bin/env lazaret\nerror('here')\n")
    local chunk = assert(script.load(path, "@" .. path, { error = error }))
    local ok, msg = pcall(chunk)
    assert.is_false(ok)
    assert.matches("s%.lua:2: here", msg)
  end)

  it("returns nil, msg, ELOOP for a symbolic link", function()
    local target = put("real.lua", "return 1\n")
    local link = dir .. "/link.lua"
    assert(os.execute("ln -s '" .. target .. "' '" .. link .. "'"))
    local chunk, msg, code = script.load(link, "@" .. link, {})
    assert.is_nil(chunk)
    assert.matches("symbolic link", msg)
    assert.are.equal(errno.ELOOP, code)
  end)

  it("returns nil, msg, errno for a missing file, a FIFO and a directory", function()
    local chunk, msg, code = script.load(dir .. "/missing.lua", "@m", {})
    assert.is_nil(chunk)
    assert.matches("missing%.lua", msg)
    assert.are.equal(errno.ENOENT, code)
    assert(os.execute("mkfifo '" .. dir .. "/fifo.lua'"))
    chunk, msg, code = script.load(dir .. "/fifo.lua", "@f", {})
    assert.is_nil(chunk)
    assert.matches("not a regular file", msg)
    assert.are.equal(errno.EINVAL, code)
    chunk, msg, code = script.load(dir, "@d", {})
    assert.is_nil(chunk)
    assert.are.equal(errno.EINVAL, code)
  end)

  it("accepts script.MAX bytes and refuses one more with EFBIG", function()
    assert.are.equal(1024 * 1024, script.MAX)
    local body = "return 1\n"
    local path = put("max.lua", body .. string.rep(" ", script.MAX - #body))
    assert.is_function(script.load(path, "@max", {}))
    path = put("big.lua", body .. string.rep(" ", script.MAX - #body + 1))
    local chunk, msg, code = script.load(path, "@big", {})
    assert.is_nil(chunk)
    assert.matches("larger than", msg)
    assert.are.equal(errno.EFBIG, code)
  end)

  it("raises on bad arguments", function()
    local path = put("r.lua", "return 1\n")
    assert.has_error(function() script.load(1, "@x", {}) end)
    assert.has_error(function() script.load(nil, "@x", {}) end)
    assert.has_error(function() script.load(path, nil, {}) end)
    assert.has_error(function() script.load(path, "@x", nil) end)
    assert.has_error(function() script.load(path, "@x", "env") end)
    assert.has_error(function() script.load(path .. "\0.lua", "@x", {}) end)
    assert.has_error(function() script.load(path, "@x", {}, "extra") end)
  end)

  it("leaks no globals", function()
    local before = globals()
    local path = put("g.lua", "leaked = true\nreturn 1\n")
    local env = {}
    assert(script.load(path, "@g", env))()
    assert.is_true(env.leaked)
    assert.are.same(before, globals())
  end)
end)
