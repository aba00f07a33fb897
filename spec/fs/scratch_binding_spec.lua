-- busted spec for bindings/fs/l_scratch.c (lazaret.core.scratch) and
-- session.capture's argument checks (bindings/session/l_session.c). The
-- mechanisms have cmocka tests (tests/fs/test_scratch.c,
-- tests/session/test_capture.c); lazaret qualify's e2e tests use both for
-- real.
require("lazaret_spec")
local scratch = require("lazaret.core.scratch")
local session = require("lazaret.core.session")
local errno = require("lazaret.core.errno")

describe("lazaret.core.scratch", function()
  local name, ws

  before_each(function()
    name = string.format("spec-scratch-%d-%d", os.time(), math.random(1, 1e9))
    ws = assert(scratch.open(name))
  end)

  after_each(function()
    local path = ws:path()
    ws:close()
    os.execute("rm -rf '" .. path .. "'")
  end)

  it("opens an empty private directory under the cache root", function()
    local suffix = "/lazaret/" .. name
    assert.are.equal(suffix, ws:path():sub(-#suffix))
    assert.matches("^lazaret.scratch %(", tostring(ws))
    local f = io.popen("stat -c %a '" .. ws:path() .. "'")
    assert.are.equal("700", f:read("l"))
    f:close()
  end)

  it("writes, reads and makes directories beneath it", function()
    assert.is_true(ws:mkdir("d"))
    assert.is_true(ws:write("d/f", "a\0b"))
    assert.are.equal("a\0b", ws:read("d/f"))
    assert.are.equal("a", ws:read("d/f", 3):sub(1, 1))
    local r, msg, code = ws:read("d/f", 2)
    assert.is_nil(r)
    assert.matches("larger than 2 bytes", msg)
    assert.are.equal(errno.EFBIG, code)
  end)

  it("refuses a symlink planted in it, and names outside it", function()
    os.execute("ln -s /etc/passwd '" .. ws:path() .. "/link'")
    local r, msg, code = ws:read("link")
    assert.is_nil(r)
    assert.matches("'link'", msg)
    assert.are.equal(errno.ELOOP, code)
    for _, bad in ipairs({ "../x", "/etc/passwd", "", "a/" }) do
      r, msg, code = ws:read(bad)
      assert.is_nil(r)
      assert.are.equal(errno.EINVAL, code)
    end
  end)

  it("empties itself when opened again", function()
    assert.is_true(ws:write("old", "x"))
    local again = assert(scratch.open(name))
    local r, _, code = again:read("old")
    assert.is_nil(r)
    assert.are.equal(errno.ENOENT, code)
    again:close()
  end)

  it("raises when closed, and closes idempotently", function()
    local path = ws:path()
    ws:close()
    ws:close()
    assert.are.equal("lazaret.scratch (closed)", tostring(ws))
    assert.has_error(function() ws:read("x") end, "attempt to use a closed scratch workspace")
    ws = assert(scratch.open(name)) -- for after_each
    assert.are.equal(path, ws:path())
  end)

  it("raises on a name or path with a NUL byte", function()
    assert.has_error(function() scratch.open(name .. "\0x") end)
    assert.error_matches(function() scratch.open(name .. "\0x") end, "contains a NUL byte")
    assert.error_matches(function() ws:write("f\0/../x", "data") end, "contains a NUL byte")
    assert.error_matches(function() ws:mkdir("d\0x") end, "contains a NUL byte")
    assert.error_matches(function() ws:read("f\0x") end, "contains a NUL byte")
    assert.is_nil((ws:read("f")))
  end)

  it("refuses a name that is not one component", function()
    for _, bad in ipairs({ "a/b", "..", "." }) do
      local r, _, code = scratch.open(bad)
      assert.is_nil(r)
      assert.are.equal(errno.EINVAL, code)
    end
    assert.has_error(function() scratch.open() end)
  end)
end)

describe("lazaret.core.session.capture", function()
  it("checks its arguments", function()
    assert.has_error(function() session.capture("x", {}) end)
    assert.has_error(function() session.capture({}, {}) end)
    assert.has_error(function() session.capture({ 1 }, {}) end, "argument 1 must be a string")
    assert.has_error(function() session.capture({ "-e", "x\0y" }, {}) end,
      "argument 2 must be a string without NUL bytes")
    -- Read raw: a proxy's strings would be dropped before the spawn reads them.
    local proxy = setmetatable({}, { __len = function() return 1 end, __index = function() return "-v" end })
    assert.has_error(function() session.capture(proxy, {}) end, "the arguments must be a plain table (it has a metatable)")
    assert.has_error(function() session.capture({ "-v" }, setmetatable({}, {})) end,
      "the options must be a plain table (it has a metatable)")
    assert.has_error(function() session.capture({ "--version" }, { bogus = true }) end, "unknown option 'bogus'")
    assert.has_error(function() session.capture({ "--version" }, { timeout_ms = 0 }) end)
    assert.has_error(function() session.capture({ "--version" }, { max_output = 2 ^ 21 }) end)
  end)

  -- In a spec this process is lua5.4, so "this executable" is lua5.4: the
  -- binding's path, argv and result table, not lazaret itself.
  it("runs this very executable and returns its status and output", function()
    local r = assert(session.capture({ "-e", "io.write('out') io.stdout:flush() io.stderr:write('err') os.exit(3)" }, {}))
    assert.are.same({ status = 3, output = "outerr", timed_out = false, truncated = false }, r)
    r = assert(session.capture({ "-e", "while true do end" }, { timeout_ms = 200 }))
    assert.is_true(r.timed_out)
    assert.is_false(r.status)
    r = assert(session.capture({ "-e", "io.write(string.rep('x', 5000))" }, { max_output = 10 }))
    assert.are.same({ 0, "xxxxxxxxxx", true }, { r.status, r.output, r.truncated })
  end)
end)
