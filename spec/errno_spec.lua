-- busted spec for bindings/l_errno.c (lazaret.core.errno): the errno names
-- every binding's nil, msg, errno is compared against. Needs the test
-- module: busted --cpath='<builddir>/?.so'.
require("lazaret_spec")
local errno = require("lazaret.core.errno")

-- The x86-64 Linux numbers (asm-generic/errno-base.h, errno.h) of every
-- name the module lists; a name added to l_errno.c must be added here.
local LINUX = {
  EPERM = 1, ENOENT = 2, ESRCH = 3, EINTR = 4, EIO = 5, ENXIO = 6, E2BIG = 7, EBADF = 9,
  ECHILD = 10, EAGAIN = 11, ENOMEM = 12, EACCES = 13, EBUSY = 16, EEXIST = 17, EXDEV = 18,
  ENODEV = 19, ENOTDIR = 20, EISDIR = 21, EINVAL = 22, ENFILE = 23, EMFILE = 24, ETXTBSY = 26,
  EFBIG = 27, ENOSPC = 28, EROFS = 30, EMLINK = 31, EPIPE = 32, ERANGE = 34, ENAMETOOLONG = 36,
  ENOSYS = 38, ELOOP = 40, ENODATA = 61, EPROTO = 71, EBADMSG = 74, EOVERFLOW = 75, EUSERS = 87,
  ENOTSOCK = 88, EOPNOTSUPP = 95, ENETUNREACH = 101, ECONNRESET = 104, ENOTCONN = 107,
  ETIMEDOUT = 110, ECONNREFUSED = 111, EHOSTUNREACH = 113, ESTALE = 116, EDQUOT = 122,
  ECANCELED = 125,
}

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

describe("lazaret.core.errno", function()
  it("maps names to the Linux numbers", function()
    assert.are.equal(1, errno.EPERM)
    assert.are.equal(2, errno.ENOENT)
    assert.are.equal(5, errno.EIO)
    assert.are.equal(16, errno.EBUSY)
    assert.are.equal(116, errno.ESTALE)
    for name, n in pairs(LINUX) do
      assert.are.equal(n, errno[name], name)
      assert.are.equal("integer", math.type(errno[name]), name)
    end
  end)

  it("lists exactly those names, plus the name function", function()
    local got, want = {}, {}
    for k, v in pairs(errno) do
      got[#got + 1] = k .. ":" .. type(v)
    end
    for k in pairs(LINUX) do
      want[#want + 1] = k .. ":number"
    end
    want[#want + 1] = "name:function"
    table.sort(got)
    table.sort(want)
    assert.are.same(want, got)
  end)

  it("round-trips every name through errno.name", function()
    for name in pairs(LINUX) do
      assert.are.equal(name, errno.name(errno[name]))
    end
    assert.are.equal("EBUSY", errno.name(16))
    assert.are.equal("ESTALE", errno.name(116))
  end)

  it("names no number it does not list", function()
    for _, n in ipairs({ 0, -1, -16, 8, 9999, math.maxinteger, math.mininteger }) do
      assert.is_nil(errno.name(n), tostring(n))
    end
  end)

  it("raises on an unknown name instead of returning nil", function()
    assert.has_error(function() return errno.EBUSYY end, "lazaret.core.errno has no 'EBUSYY'")
    assert.has_error(function() return errno.ebusy end, "lazaret.core.errno has no 'ebusy'")
    assert.has_error(function() return errno[16] end, "lazaret.core.errno has no '16'")
    assert.has_error(function() return errno.EWOULDBLOCK end)
  end)

  it("raises on a name lookup of a non-integer", function()
    assert.has_error(function() errno.name() end)
    assert.has_error(function() errno.name("EBUSY") end)
    assert.has_error(function() errno.name(1.5) end)
    assert.has_error(function() errno.name({}) end)
  end)

  it("hides its metatable, so the raising lookup cannot be removed", function()
    assert.is_false(getmetatable(errno))
    -- A userdata: setmetatable cannot reach it from Lua at all.
    assert.has_error(function() setmetatable(errno, nil) end)
    assert.equal("userdata", type(errno))
    assert.has_error(function() return errno.NOPE end)
  end)

  it("is read-only: no code can renumber a name for everyone else", function()
    assert.has_error(function() errno.EBUSY = 0 end, "lazaret.core.errno is read-only (assigning 'EBUSY')")
    assert.has_error(function() errno.NEW = 1 end)
    assert.has_error(function() rawset(errno, "EBUSY", 0) end) -- not a plain table either
    assert.are.equal(16, errno.EBUSY)
  end)

  it("is one table, shared by every require", function()
    assert.are.equal(errno, require("lazaret.core.errno"))
    assert.are.equal(errno, require("lazaret.core.probe").errno)
  end)

  it("leaks no globals", function()
    local before = globals()
    package.loaded["lazaret.core.errno"] = nil
    local fresh = require("lazaret.core.errno")
    package.loaded["lazaret.core.errno"] = errno
    assert.are.equal(16, fresh.EBUSY)
    assert.are.equal("EIO", fresh.name(5))
    assert.are.same(before, globals())
  end)
end)
