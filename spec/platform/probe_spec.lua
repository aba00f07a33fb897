-- busted spec for bindings/l_probe.c (lazaret.core.probe). Needs the test
-- module: busted --cpath='<builddir>/?.so'. Passes as root and as an
-- unprivileged user; host-dependent results are checked for their shape.
require("lazaret_spec")
local probe = require("lazaret.core.probe")

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

-- No value anywhere in v is a userdata (no raw handle or descriptor).
local function assert_plain(v)
  assert.are_not.equal("userdata", type(v))
  if type(v) == "table" then
    for k, x in pairs(v) do
      assert_plain(k)
      assert_plain(x)
    end
  end
end

local function assert_failure(r, msg, errno)
  assert.is_nil(r)
  assert.is_string(msg)
  assert.are.equal("integer", math.type(errno))
  assert.is_true(errno > 0)
end

describe("lazaret.core.probe", function()
  it("exports the documented functions and tables only", function()
    local names = {}
    for k, v in pairs(probe) do
      names[#names + 1] = k .. ":" .. type(v)
    end
    table.sort(names)
    assert.are.same({
      "descriptors:function", "device_rw:function", "devices:table", "egress:function", "errno:userdata",
      "file:function",
      "identity:function", "kernel:function", "landlock:function", "library:function", "locate:function",
      "memory:function", "runtime_root:function", "subid_range:function", "subids:function", "tool:function", "tools:table",
      "trusted_dirs:table", "userns:function",
    }, names)
    assert.are.same({ "/dev/fuse", "/dev/net/tun", "/dev/kvm" }, probe.devices)
    assert.are.same({ "runsc", "slirp4netns", "newuidmap", "newgidmap", "skopeo", "mmdebstrap" },
      probe.tools)
    assert.are.same({ "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin" },
      probe.trusted_dirs)
    assert.are.equal(2, probe.errno.ENOENT)
    assert.are.equal(13, probe.errno.EACCES)
  end)

  describe("misuse", function()
    it("raises on tool names outside the allow-list", function()
      for _, name in ipairs({ "bash", "sh", "", "runsc ", "/usr/bin/runsc", "RUNSC", "1" }) do
        assert.error_matches(function()
          probe.tool(name)
        end, "invalid option")
        assert.error_matches(function()
          probe.locate(name)
        end, "invalid option")
      end
    end)

    it("raises on wrong argument types", function()
      local calls = {
        function() probe.tool() end,
        function() probe.tool({}) end,
        function() probe.locate(true) end,
        function() probe.subids() end,
        function() probe.subids("pid") end,
        function() probe.subids({}) end,
        function() probe.subid_range() end,
        function() probe.subid_range("pid") end,
        function() probe.file() end,
        function() probe.file({}) end,
        function() probe.device_rw(false) end,
        function() probe.device_rw() end,
      }
      for i, f in ipairs(calls) do
        local ok = pcall(f)
        assert.is_false(ok, "call " .. i .. " did not raise")
      end
    end)

    it("raises on relative paths and paths with NUL bytes", function()
      assert.error_matches(function()
        probe.file("dev/null")
      end, "path must be absolute")
      assert.error_matches(function()
        probe.file("/dev/null\0x")
      end, "NUL byte")
    end)

    -- Reports choose the path: opening another device can be an action
    -- (a serial port's DTR resets a board).
    it("raises on a device outside probe.devices, without opening it", function()
      for _, path in ipairs({ "/dev/null", "/dev/ttyS0", "/dev/watchdog", "/dev/fuse/", "/dev/./fuse" }) do
        assert.error_matches(function()
          probe.device_rw(path)
        end, "invalid option")
      end
      assert.error_matches(function()
        probe.device_rw("/dev/fuse\0x")
      end, "NUL byte")
    end)

    it("raises on extra arguments", function()
      assert.error_matches(function()
        probe.kernel(1)
      end, "no value expected")
      assert.has_error(function()
        probe.identity("x")
      end)
      assert.has_error(function()
        probe.userns(true)
      end)
      assert.has_error(function()
        probe.subids("uid", "alice")
      end)
      assert.has_error(function()
        probe.subid_range("uid", "alice")
      end)
      assert.has_error(function()
        probe.file("/dev/null", 1)
      end)
      assert.has_error(function()
        probe.tool("runsc", "--help")
      end)
    end)
  end)

  describe("kernel", function()
    it("returns the release, the machine and the parsed version", function()
      local k = probe.kernel()
      assert.is_string(k.release)
      assert.is_string(k.machine)
      assert.are.equal("integer", math.type(k.major))
      assert.are.equal("integer", math.type(k.minor))
      assert.are.equal(k.release:match("^(%d+)%."), tostring(k.major))
    end)
  end)

  describe("identity", function()
    it("returns the invoking user's uid, gid and name", function()
      local id = probe.identity()
      assert.are.equal("integer", math.type(id.uid))
      assert.are.equal("integer", math.type(id.gid))
      assert.is_true(id.user == nil or type(id.user) == "string")
    end)
  end)

  describe("subids", function()
    it("returns a list of {start=, count=} or nil, msg, errno", function()
      for _, kind in ipairs({ "uid", "gid" }) do
        local ranges, msg, errno = probe.subids(kind)
        if ranges then
          for _, r in ipairs(ranges) do
            assert.are.equal("integer", math.type(r.start))
            assert.are.equal("integer", math.type(r.count))
            assert.is_true(r.start + r.count <= 1 << 32)
          end
        else
          assert_failure(ranges, msg, errno)
          assert.matches("^%a+ '/etc/sub" .. kind .. "'", msg)
        end
      end
    end)
  end)

  describe("file", function()
    it("describes /dev/null", function()
      local f = probe.file("/dev/null")
      assert.are.same({ type = "char", mode = 438, uid = 0, gid = 0, size = 0, setuid = false,
        setgid = false }, f)
    end)

    it("returns nil, message, ENOENT for a missing path", function()
      local f, msg, errno = probe.file("/nonexistent/lazaret")
      assert.is_nil(f)
      assert.are.equal("stat '/nonexistent/lazaret': No such file or directory", msg)
      assert.are.equal(probe.errno.ENOENT, errno)
    end)

    it("follows no symbolic link", function()
      -- /proc/self is a link on every Linux; /proc/self/exe a magic one.
      for _, path in ipairs({ "/proc/self", "/proc/self/exe", "/proc/self/status" }) do
        local f, msg, errno = probe.file(path)
        assert.is_nil(f)
        assert.matches("^stat '" .. path .. "': '/proc/self' is a symbolic link; the probe follows none$", msg)
        assert.are.equal(probe.errno.ELOOP, errno)
      end
    end)

    it("returns nil, message, EINVAL for a path with . or .. components", function()
      local f, msg, errno = probe.file("/dev/../dev/null")
      assert_failure(f, msg, errno)
      assert.are.equal(probe.errno.EINVAL, errno)
    end)
  end)

  describe("device_rw", function()
    it("returns true or nil, message, errno for each of probe.devices", function()
      for _, path in ipairs(probe.devices) do
        local ok, msg, errno = probe.device_rw(path)
        if not ok then
          assert_failure(ok, msg, errno)
          assert.matches(path, msg, 1, true)
        end
      end
    end)
  end)

  describe("subid_range", function()
    it("returns the range the launch maps, or nil, msg, errno", function()
      for _, kind in ipairs({ "uid", "gid" }) do
        local r, msg, errno = probe.subid_range(kind)
        if r then
          assert.are.equal("integer", math.type(r.start))
          assert.is_true(r.count >= 65536)
          assert.is_true(r.start >= 1000)
        else
          assert_failure(r, msg, errno)
          assert.matches("/etc/sub" .. kind, msg, 1, true)
        end
      end
    end)
  end)

  describe("userns", function()
    it("returns true or nil, message, errno", function()
      local ok, msg, errno = probe.userns()
      if not ok then
        assert_failure(ok, msg, errno)
        assert.matches("^unshare 'CLONE_NEWUSER': ", msg)
      end
    end)
  end)

  describe("landlock", function()
    it("gives the running kernel's ABI (this machine's has Landlock)", function()
      local abi = probe.landlock()
      assert.are.equal("number", math.type(abi) and "number")
      assert.is_true(abi >= 6)
      assert.has_error(function() probe.landlock(1) end)
    end)
  end)

  describe("descriptors", function()
    it("returns this process's descriptor limits and the cache they allow", function()
      local d = probe.descriptors()
      -- The shell's own limits, read independently.
      local function ulimit(flag)
        local f = assert(io.popen("ulimit " .. flag .. "n"))
        local v = f:read("l")
        f:close()
        return v == "unlimited" and -1 or tonumber(v)
      end
      assert.are.equal(ulimit("-S"), d.soft)
      assert.are.equal(ulimit("-H"), d.hard)
      if d.hard ~= -1 then assert.are.equal(d.hard // 4, d.dcache_cap) end
      assert.has_error(function() probe.descriptors(1) end)
    end)
  end)

  describe("egress", function()
    it("returns this host's TCP memory pressure threshold and the proxy's limits under it", function()
      local e = probe.egress()
      local f = assert(io.open("/proc/sys/net/ipv4/tcp_mem"))
      local pressure = tonumber(f:read("l"):match("^%d+%s+(%d+)"))
      f:close()
      local page = tonumber(assert(io.popen("getconf PAGESIZE")):read("l"))
      assert.are.equal(pressure * page, e.tcp_pressure)
      assert.is_true(e.max_connections >= 16 and e.max_connections <= 256)
      assert.is_true(e.upstream_rcvbuf >= 128 * 1024 and e.upstream_rcvbuf <= 1024 * 1024)
      assert.has_error(function() probe.egress(1) end)
    end)
  end)

  describe("memory", function()
    it("returns half of this host's memory and its chunk", function()
      local m = probe.memory()
      local pages = tonumber(assert(io.popen("getconf _PHYS_PAGES")):read("l"))
      local page = tonumber(assert(io.popen("getconf PAGESIZE")):read("l"))
      local half = pages * page // 2
      assert.is_true(m.budget > half - half // 100 and m.budget < half + half // 100)
      assert.is_true(m.chunk >= 32 * 1024 * 1024 and m.budget // m.chunk <= 4096)
      assert.has_error(function() probe.memory(1) end)
    end)
  end)

  describe("library", function()
    it("loads libgit2 and libarchive and names their sonames", function()
      assert.matches("^libgit2%.so%.", probe.library("libgit2").soname)
      assert.matches("^libarchive%.so%.", probe.library("libarchive").soname)
    end)

    it("raises for any other name or extra arguments", function()
      assert.has_error(function() probe.library("libc") end)
      assert.has_error(function() probe.library() end)
      assert.has_error(function() probe.library("libgit2", 1) end)
    end)
  end)

  describe("runtime_root", function()
    it("names $XDG_RUNTIME_DIR/lazaret, and what it is when it exists", function()
      local xdg = os.getenv("XDG_RUNTIME_DIR")
      local rr, msg = probe.runtime_root()
      if xdg == nil or xdg == "" then
        assert.is_nil(rr)
        assert.matches("XDG_RUNTIME_DIR is not set", msg, 1, true)
        return
      end
      assert.are.equal(xdg .. "/lazaret", rr.path)
      assert.is_boolean(rr.exists)
      if rr.exists then
        assert.are.equal("directory", rr.type)
        assert.is_number(rr.uid)
        assert.is_number(rr.mode)
      end
      assert.has_error(function() probe.runtime_root(1) end)
    end)
  end)

  describe("tool", function()
    it("returns the path and the first line of --version for runsc", function()
      local t, msg, errno = probe.tool("runsc")
      if not t and errno == probe.errno.ENOENT then
        pending("runsc is not installed: " .. msg)
        return
      end
      assert.is_string(t.path)
      assert.matches("/runsc$", t.path)
      assert.matches("^runsc version ", t.version)
      assert.is_nil(t.version:find("[%c]"))
      assert.are.equal(t.path, probe.locate("runsc"))
    end)

    it("returns a path or nil, message, errno from locate", function()
      for _, name in ipairs(probe.tools) do
        local path, msg, errno = probe.locate(name)
        if path then
          assert.matches("^/.*/" .. name .. "$", path)
        else
          assert_failure(path, msg, errno)
        end
      end
    end)
  end)

  it("exposes no userdata in any result", function()
    assert_plain(probe.kernel())
    assert_plain(probe.identity())
    assert_plain({ probe.subids("uid") })
    assert_plain({ probe.subid_range("uid") })
    assert_plain({ probe.file("/dev/null") })
    assert_plain({ probe.tool("slirp4netns") })
    assert_plain({ probe.userns() })
  end)

  it("leaks no globals", function()
    local before = globals()
    package.loaded["lazaret.core.probe"] = nil
    local fresh = require("lazaret.core.probe")
    package.loaded["lazaret.core.probe"] = probe
    fresh.kernel()
    fresh.userns()
    assert.are.same(before, globals())
  end)
end)
