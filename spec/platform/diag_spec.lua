-- busted spec for lua/lazaret/diag/report.lua (formatting) and for the
-- judgement in lua/lazaret/diag.lua, which runs here against a fake probe
-- with the shape of lazaret.core.probe (no C module, no host facts).
local report = require("lazaret.platform.report")
local diag = require("lazaret.platform.diag")

local ERRNO = { EACCES = 13, EINVAL = 22, ENODEV = 19, ENOENT = 2, EPERM = 1 }

-- A probe whose every fact is healthy; fields of `over` replace functions.
local function fake_probe(over)
  local p = {
    errno = ERRNO,
    kernel = function()
      return { release = "6.18.44-fc-v657", machine = "x86_64", major = 6, minor = 18 }
    end,
    identity = function()
      return { uid = 1000, gid = 1000, user = "alice" }
    end,
    subids = function()
      return { { start = 100000, count = 65536 } }
    end,
    subid_range = function()
      return { start = 100000, count = 65536 }
    end,
    locate = function(name)
      return "/usr/bin/" .. name
    end,
    file = function()
      return { type = "file", mode = 2541, uid = 0, gid = 0, size = 1, setuid = true, setgid = false }
    end,
    tool = function(name)
      local versions = { runsc = "runsc version 0.0~20240729.0", slirp4netns = "slirp4netns version 1.2.0" }
      return { path = "/usr/bin/" .. name, version = versions[name] }
    end,
    device_rw = function()
      return true
    end,
    userns = function()
      return true
    end,
    descriptors = function()
      return { soft = 1024, hard = 20000, dcache_cap = 5000 }
    end,
    egress = function()
      return { tcp_pressure = 1572368384, max_connections = 107, upstream_rcvbuf = 1048576 }
    end,
    memory = function()
      return { budget = 12637339648, chunk = 33554432 }
    end,
    library = function(name)
      return { soname = ({ libgit2 = "libgit2.so.1.5", libarchive = "libarchive.so.13" })[name] }
    end,
    runtime_root = function()
      return { path = "/run/user/1000/lazaret", exists = true, type = "directory", uid = 1000, mode = 448 }
    end,
    landlock = function()
      return 7
    end,
  }
  for k, v in pairs(over or {}) do
    p[k] = v
  end
  return p
end

local function by_name(checks)
  local t = {}
  for _, c in ipairs(checks) do
    t[c.name] = c
  end
  return t
end

-- Runs diag.run with io.write captured; returns status, output.
local function run_captured(opts)
  local out = {}
  local write = io.write
  io.write = function(...)
    for i = 1, select("#", ...) do
      out[#out + 1] = select(i, ...)
    end
  end
  local ok, status = pcall(diag.run, opts)
  io.write = write
  assert(ok, status)
  return status, table.concat(out)
end

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

local CHECKS = {
  { name = "kernel", status = "ok", detail = "6.18.44 x86_64" },
  { name = "subuid", status = "problem", detail = "no allocation for alice",
    fix = "as root: usermod --add-subuids 100000-165535 alice" },
  { name = "/dev/net/tun", status = "ok", detail = "read-write for the invoking user" },
}

describe("lazaret.platform.report", function()
  describe("text", function()
    it("aligns status, name and detail, puts a fix under each problem and ends with a summary", function()
      assert.are.equal(table.concat({
        "ok       kernel        6.18.44 x86_64",
        "problem  subuid        no allocation for alice",
        "  fix: as root: usermod --add-subuids 100000-165535 alice",
        "ok       /dev/net/tun  read-write for the invoking user",
        "3 checks, 1 problem",
        "",
      }, "\n"), report.text(CHECKS))
    end)

    it("says 0 checks, 0 problems for an empty list", function()
      assert.are.equal("0 checks, 0 problems\n", report.text({}))
    end)

    it("shows control characters from the host as ?", function()
      local out = report.text({ { name = "runsc", status = "problem", detail = "a\27[2Jb\nc",
        fix = "x\ry" } })
      assert.are.equal("problem  runsc  a?[2Jb?c\n  fix: x?y\n1 check, 1 problem\n", out)
    end)

    it("escapes C1 controls and bytes that are not UTF-8, in text and JSON", function()
      require("lazaret_spec")
      local checks = { { name = "runtime root", status = "problem", detail = "/run/\255\194\155x",
        fix = "make \194\155 a directory" } }
      local text = report.text(checks)
      assert.is_nil(text:find("\194\155", 1, true))
      assert.is_nil(text:find("\255", 1, true))
      local ok, out = pcall(report.json, checks)
      assert.is_true(ok, tostring(out))
      assert.is_nil(out:find("\194\155", 1, true))
    end)

    it("raises on malformed checks", function()
      for _, bad in ipairs({
        "nope",
        { { status = "ok" } },
        { { name = "x", status = "warn" } },
        { { name = "x", status = "ok", detail = 1 } },
        { { name = "x", status = "problem", fix = {} } },
      }) do
        assert.has_error(function()
          report.text(bad)
        end)
        assert.has_error(function()
          report.json(bad)
        end)
      end
    end)
  end)

  describe("json", function()
    it("encodes checks with sorted keys, fix null when ok, and a summary", function()
      assert.are.equal('{"checks":['
        .. '{"detail":"6.18.44 x86_64","fix":null,"name":"kernel","status":"ok"},'
        .. '{"detail":"no allocation for alice","fix":"as root: usermod --add-subuids 100000-165535 alice",'
        .. '"name":"subuid","status":"problem"},'
        .. '{"detail":"read-write for the invoking user","fix":null,"name":"/dev/net/tun","status":"ok"}'
        .. '],"summary":{"checks":3,"problems":1}}\n', report.json(CHECKS))
    end)

    it("encodes an empty list", function()
      assert.are.equal('{"checks":[],"summary":{"checks":0,"problems":0}}\n', report.json({}))
    end)
  end)
end)

describe("lazaret.platform.diag", function()
  it("reports every check ok on a ready host, in a fixed order", function()
    local checks = diag.collect(fake_probe())
    local names = {}
    for i, c in ipairs(checks) do
      names[i] = c.name
      assert.are.equal("ok", c.status, c.name .. ": " .. tostring(c.detail))
      assert.is_nil(c.fix)
      assert.is_string(c.detail)
    end
    assert.are.same({ "kernel", "subuid", "subgid", "newuidmap", "newgidmap", "runsc", "slirp4netns",
      "/dev/fuse", "/dev/net/tun", "userns", "descriptors", "egress proxy", "sandbox memory", "runtime root", "libgit2", "libarchive", "landlock" }, names)
  end)

  describe("kernel", function()
    local FIX = "Lazaret needs Linux 6.9 or newer on x86-64 (Debian 12: as root, apt-get install "
      .. "-t bookworm-backports linux-image-amd64, then reboot)"
    local function kernel_check(k)
      return by_name(diag.collect(fake_probe({ kernel = function() return k end }))).kernel
    end

    it("accepts 6.9 exactly and 7.0", function()
      assert.are.equal("ok", kernel_check({ release = "6.9.0", machine = "x86_64", major = 6, minor = 9 }).status)
      assert.are.equal("ok", kernel_check({ release = "7.0", machine = "x86_64", major = 7, minor = 0 }).status)
    end)

    it("refuses Linux 6.8 and 5.19 with the upgrade advice", function()
      for _, k in ipairs({
        { release = "6.8.12", machine = "x86_64", major = 6, minor = 8 },
        { release = "5.19.0", machine = "x86_64", major = 5, minor = 19 },
      }) do
        local c = kernel_check(k)
        assert.are.equal("problem", c.status)
        assert.are.equal(FIX, c.fix)
        assert.matches("older than 6%.9", c.detail)
      end
    end)

    it("refuses other architectures and unparsable releases", function()
      local c = kernel_check({ release = "6.18.0", machine = "aarch64", major = 6, minor = 18 })
      assert.are.equal("problem", c.status)
      assert.are.equal("6.18.0 aarch64: not x86-64", c.detail)
      assert.are.equal(FIX, c.fix)
      c = kernel_check({ release = "weird", machine = "x86_64" })
      assert.are.equal("problem", c.status)
      assert.are.equal(FIX, c.fix)
    end)
  end)

  describe("subordinate IDs", function()
    local function subid_checks(subid_range, identity, subids)
      return by_name(diag.collect(fake_probe({ subid_range = subid_range, identity = identity,
        subids = subids })))
    end
    local function none(kind)
      return nil, "no /etc/sub" .. kind .. " range of at least 65536 IDs for you (add one with usermod "
        .. "--add-sub" .. kind .. "s; see docs/install.md)", ERRNO.ENOENT
    end

    it("reports no range with the usermod command for each file", function()
      local c = subid_checks(none)
      assert.are.equal("problem", c.subuid.status)
      assert.are.equal("no /etc/subuid range of at least 65536 IDs for you (add one with usermod "
        .. "--add-subuids; see docs/install.md)", c.subuid.detail)
      assert.matches("usermod %-%-add%-subuids 100000%-165535 alice", c.subuid.fix)
      assert.are.equal("problem", c.subgid.status)
      assert.matches("usermod %-%-add%-subgids 100000%-165535 alice", c.subgid.fix)
    end)

    it("passes on that there is no allocation at all", function()
      local c = subid_checks(function(kind)
        return nil, "no allocation for alice in /etc/sub" .. kind .. " (add a range of at least 65536 IDs with "
          .. "usermod --add-sub" .. kind .. "s; see docs/install.md)", ERRNO.ENOENT
      end)
      assert.matches("^no allocation for alice in /etc/subuid", c.subuid.detail)
      assert.matches("usermod %-%-add%-subuids 100000%-165535 alice", c.subuid.fix)
    end)

    it("names the uid when the user has no passwd entry", function()
      local c = subid_checks(none, function() return { uid = 4242, gid = 4242 } end)
      assert.matches("%-%-add%-subuids 100000%-165535 4242 ", c.subuid.fix)
    end)

    it("reports the range the launch maps", function()
      local c = subid_checks(function(kind)
        return kind == "uid" and { start = 200000, count = 100000 } or { start = 300000, count = 65536 }
      end)
      assert.are.equal("ok", c.subuid.status)
      assert.are.equal("alice: 100000 IDs from 200000", c.subuid.detail)
      assert.are.equal("alice: 65536 IDs from 300000", c.subgid.detail)
    end)

    -- The launch maps one allocation: two adjacent halves are none, whatever
    -- the ranges listed (diag judges by the launch's function, never by its own).
    it("judges as the launch does, not by the listed ranges", function()
      local c = subid_checks(none, nil, function()
        return { { start = 132768, count = 32768 }, { start = 100000, count = 32768 } }
      end)
      assert.are.equal("problem", c.subuid.status)
      assert.matches("no /etc/subuid range of at least 65536", c.subuid.detail, 1, true)
    end)

    it("passes an unsafe range on with advice to replace it", function()
      local c = subid_checks(function(kind)
        return nil, "/etc/sub" .. kind .. ": alice's range 0-65535 (the lowest of at least 65536 IDs, the one a "
          .. "launch maps) holds " .. kind .. " 0 (root), which image IDs would become; ...", ERRNO.EPERM
      end, nil, function()
        return { { start = 0, count = 65536 } }
      end)
      assert.are.equal("problem", c.subuid.status)
      assert.matches("holds uid 0 %(root%)", c.subuid.detail)
      assert.matches("give alice a range in /etc/subuid from 100000 up", c.subuid.fix)
      assert.are.equal("problem", c.subgid.status)
    end)

    it("passes a parse error on with advice to correct the file", function()
      local c = subid_checks(function(kind)
        return nil, "parse '/etc/sub" .. kind .. "': line 3: empty owner", ERRNO.EINVAL
      end)
      assert.are.equal("problem", c.subgid.status)
      assert.are.equal("parse '/etc/subgid': line 3: empty owner", c.subgid.detail)
      assert.matches("correct /etc/subgid", c.subgid.fix)
    end)

    it("advises usermod when the file is missing", function()
      local c = subid_checks(function(kind)
        return nil, "open '/etc/sub" .. kind .. "': No such file or directory", ERRNO.ENOENT
      end)
      assert.are.equal("problem", c.subuid.status)
      assert.matches("usermod %-%-add%-subuids", c.subuid.fix)
    end)
  end)

  describe("setuid helpers", function()
    it("needs newuidmap and newgidmap setuid root", function()
      local c = by_name(diag.collect(fake_probe({
        file = function(path)
          return { type = "file", mode = 493, uid = 0, gid = 0, size = 1, setuid = false,
            setgid = false, path = path }
        end,
      })))
      assert.are.equal("problem", c.newuidmap.status)
      assert.are.equal("/usr/bin/newuidmap is not setuid root (mode 0755, owner uid 0)", c.newuidmap.detail)
      assert.matches("apt%-get install %-%-reinstall uidmap", c.newuidmap.fix)
      assert.are.equal("problem", c.newgidmap.status)
    end)

    it("refuses a setuid helper not owned by root", function()
      local c = by_name(diag.collect(fake_probe({
        file = function()
          return { type = "file", mode = 2541, uid = 1000, gid = 0, size = 1, setuid = true, setgid = false }
        end,
      })))
      assert.are.equal("problem", c.newgidmap.status)
    end)

    it("says to install uidmap when the helpers are missing", function()
      local c = by_name(diag.collect(fake_probe({
        locate = function(name)
          return nil, "locate '" .. name .. "': not found in /usr/bin", ERRNO.ENOENT
        end,
      })))
      assert.are.equal("locate 'newuidmap': not found in /usr/bin", c.newuidmap.detail)
      assert.are.equal("as root: apt-get install uidmap", c.newuidmap.fix)
    end)
  end)

  describe("tools", function()
    it("shows the version line and path", function()
      local c = by_name(diag.collect(fake_probe()))
      assert.are.equal("runsc version 0.0~20240729.0 (/usr/bin/runsc)", c.runsc.detail)
      assert.are.equal("slirp4netns version 1.2.0 (/usr/bin/slirp4netns)", c.slirp4netns.detail)
    end)

    it("notes a runsc older than 2024-07-29 without failing it", function()
      local c = by_name(diag.collect(fake_probe({
        tool = function(name)
          return { path = "/usr/bin/" .. name, version = name .. " version 0.0~20221219.0" }
        end,
      })))
      assert.are.equal("ok", c.runsc.status)
      assert.matches("no directfs", c.runsc.detail)
      assert.is_nil(c.slirp4netns.detail:find("directfs"))
    end)

    it("reports a missing tool with install advice", function()
      local c = by_name(diag.collect(fake_probe({
        tool = function(name)
          return nil, "locate '" .. name .. "': not found in /usr/bin", ERRNO.ENOENT
        end,
      })))
      assert.are.equal("problem", c.runsc.status)
      assert.matches("bookworm%-backports", c.runsc.fix)
      assert.are.equal("as root: apt-get install slirp4netns", c.slirp4netns.fix)
    end)
  end)

  describe("devices", function()
    it("advises chmod 0666 when the device cannot be opened read-write", function()
      local c = by_name(diag.collect(fake_probe({
        device_rw = function(path)
          return nil, "open read-write '" .. path .. "': Permission denied", ERRNO.EACCES
        end,
      })))
      assert.are.equal("problem", c["/dev/fuse"].status)
      assert.are.equal("open read-write '/dev/fuse': Permission denied", c["/dev/fuse"].detail)
      assert.are.equal("as root: chmod 0666 /dev/fuse (see docs/install.md)", c["/dev/fuse"].fix)
      assert.are.equal("as root: chmod 0666 /dev/net/tun (see docs/install.md)", c["/dev/net/tun"].fix)
    end)

    it("advises loading the module when the device is missing", function()
      local c = by_name(diag.collect(fake_probe({
        device_rw = function(path)
          return nil, "open '" .. path .. "': No such file or directory", ERRNO.ENOENT
        end,
      })))
      assert.matches("modprobe tun", c["/dev/net/tun"].fix)
      assert.matches("modprobe fuse", c["/dev/fuse"].fix)
    end)
  end)

  describe("userns", function()
    it("reports the errno message when user namespaces are refused", function()
      local c = by_name(diag.collect(fake_probe({
        userns = function()
          return nil, "unshare 'CLONE_NEWUSER': Operation not permitted", ERRNO.EPERM
        end,
      })))
      assert.are.equal("problem", c.userns.status)
      assert.are.equal("unshare 'CLONE_NEWUSER': Operation not permitted", c.userns.detail)
      assert.matches("user%.max_user_namespaces", c.userns.fix)
    end)
  end)

  describe("descriptors", function()
    local function descriptors(d, msg)
      return by_name(diag.collect(fake_probe({ descriptors = function() return d, msg, 1 end }))).descriptors
    end

    it("states the limit and the dentry cache it allows", function()
      local c = descriptors({ soft = 1024, hard = 20000, dcache_cap = 5000 })
      assert.are.equal("ok", c.status)
      assert.are.equal("limit 20000 (hard; a launch raises the soft limit 1024 to it): runsc caches at "
        .. "most 5000 workspace files, more are looked up again, never refused", c.detail)
    end)

    it("is a problem below 4096, with what to raise", function()
      local c = descriptors({ soft = 1024, hard = 1024, dcache_cap = 256 })
      assert.are.equal("problem", c.status)
      assert.matches("runsc caches at most 256 workspace files", c.detail)
      assert.matches("below 4096, large workspaces are slow$", c.detail)
      assert.matches("ulimit %-Hn", c.fix)
      assert.are.equal("ok", descriptors({ soft = 4096, hard = 4096, dcache_cap = 1024 }).status)
    end)

    it("accepts no limit and reports a failed probe", function()
      assert.are.equal("ok", descriptors({ soft = -1, hard = -1, dcache_cap = 0 }).status)
      local c = descriptors(nil, "getrlimit: Operation not permitted")
      assert.are.equal("problem", c.status)
      assert.are.equal("getrlimit: Operation not permitted", c.detail)
    end)
  end)

  describe("egress proxy", function()
    local function egress(e, msg)
      return by_name(diag.collect(fake_probe({ egress = function() return e, msg, 2 end })))["egress proxy"]
    end

    it("states what the proxy may hold of the host's TCP memory", function()
      local c = egress({ tcp_pressure = 1572368384, max_connections = 107, upstream_rcvbuf = 1048576 })
      assert.are.equal("ok", c.status)
      assert.are.equal("at most 107 connections at once for all your Domains, a 1024 KiB receive buffer each "
        .. "from upstream (a quarter of the host's TCP memory pressure threshold, 1499 MiB)", c.detail)
    end)

    it("reports an unreadable threshold with what a launch needs", function()
      local c = egress(nil, "reading /proc/sys/net/ipv4/tcp_mem: No such file or directory")
      assert.are.equal("problem", c.status)
      assert.are.equal("reading /proc/sys/net/ipv4/tcp_mem: No such file or directory", c.detail)
      assert.matches("allow_domains", c.fix)
    end)
  end)

  describe("sandbox memory", function()
    local function memory(m, msg)
      return by_name(diag.collect(fake_probe({ memory = function() return m, msg, 5 end })))["sandbox memory"]
    end

    it("states the budget every sandbox shares", function()
      local c = memory({ budget = 12637339648, chunk = 33554432 })
      assert.are.equal("ok", c.status)
      assert.are.equal("at most 12051 MiB for all your sandboxes together (half of the host's memory), counted "
        .. "in chunks of 32 MiB; when they need more, each may hold its share (that divided by the sandboxes "
        .. "running)", c.detail)
    end)

    it("reports a host whose memory cannot be read", function()
      local c = memory(nil, "the host's memory cannot be read (sysinfo)")
      assert.are.equal("problem", c.status)
      assert.are.equal("the host's memory cannot be read (sysinfo)", c.detail)
      assert.matches("sysinfo(2)", c.fix, 1, true)
    end)
  end)

  describe("libraries", function()
    it("names the soname each library loads by", function()
      local c = by_name(diag.collect(fake_probe()))
      assert.are.equal("libgit2.so.1.5 loads", c.libgit2.detail)
      assert.are.equal("libarchive.so.13 loads", c.libarchive.detail)
    end)

    it("reports a library that cannot be loaded with the package to install", function()
      local c = by_name(diag.collect(fake_probe({
        library = function(name)
          if name == "libarchive" then return nil, "cannot load libarchive.so.13 (not found)", 2 end
          return { soname = "libgit2.so.1.5" }
        end,
      })))
      assert.are.equal("ok", c.libgit2.status)
      assert.are.equal("problem", c.libarchive.status)
      assert.are.equal("cannot load libarchive.so.13 (not found)", c.libarchive.detail)
      assert.matches("apt install libarchive13", c.libarchive.fix, 1, true)
    end)
  end)

  describe("landlock", function()
    local function landlock(abi)
      return by_name(diag.collect(fake_probe({ landlock = function() return abi end }))).landlock
    end

    it("says what the helpers are restricted in, by ABI", function()
      local c = landlock(7)
      assert.are.equal("ok", c.status)
      assert.matches("ABI 7: .* restricted in files, TCP and signals", c.detail)
      c = landlock(5)
      assert.are.equal("ok", c.status)
      assert.matches("signals need ABI 6", c.detail, 1, true)
    end)

    it("is a problem without Landlock, with how to enable it", function()
      local c = landlock(0)
      assert.are.equal("problem", c.status)
      assert.matches("run with your file authority", c.detail, 1, true)
      assert.matches("lsm=", c.fix, 1, true)
    end)
  end)

  describe("runtime root", function()
    local function rr(r, msg, errno)
      return by_name(diag.collect(fake_probe({ runtime_root = function() return r, msg, errno end })))
        ["runtime root"]
    end

    it("is ok when the root does not exist yet: the first launch makes it", function()
      local c = rr({ path = "/run/user/1000/lazaret", exists = false, creatable = true })
      assert.are.equal("ok", c.status)
      assert.matches("made 0700 at the first launch", c.detail, 1, true)
    end)

    it("is a problem when the first launch could not make it", function()
      local c = rr({ path = "/run/user/1000/lazaret", exists = false, creatable = false })
      assert.are.equal("problem", c.status)
      assert.matches("does not exist and cannot be made", c.detail, 1, true)
      assert.matches("set XDG_RUNTIME_DIR to a private directory of yours", c.fix, 1, true)
    end)

    it("tells what to set when XDG_RUNTIME_DIR is unset or relative", function()
      local c = rr(nil, "XDG_RUNTIME_DIR is not set; Lazaret keeps its private runtime state there", 22)
      assert.are.equal("problem", c.status)
      assert.matches("XDG_RUNTIME_DIR is not set", c.detail, 1, true)
      assert.matches("set XDG_RUNTIME_DIR to a private directory of yours", c.fix, 1, true)
    end)

    it("refuses a root of another user, another mode or another type, naming the fix", function()
      for _, r in ipairs({
        { path = "/run/user/1000/lazaret", exists = true, type = "directory", uid = 1001, mode = 448 },
        { path = "/run/user/1000/lazaret", exists = true, type = "directory", uid = 1000, mode = 493 },
        { path = "/run/user/1000/lazaret", exists = true, type = "file", uid = 1000, mode = 448 },
      }) do
        local c = rr(r)
        assert.are.equal("problem", c.status)
        assert.matches("is not a directory of yours with mode 0700", c.detail, 1, true)
        assert.matches("chmod 0700 /run/user/1000/lazaret", c.fix, 1, true)
      end
    end)
  end)

  describe("run", function()
    it("writes the text report and returns 0 when every check is ok", function()
      local status, out = run_captured({ json = false, probe = fake_probe() })
      assert.are.equal(0, status)
      assert.matches("\n17 checks, 0 problems\n$", out)
    end)

    it("writes JSON and returns 1 when a check is a problem", function()
      local status, out = run_captured({ json = true, probe = fake_probe({
        userns = function() return nil, "unshare 'CLONE_NEWUSER': Operation not permitted", 1 end,
      }) })
      assert.are.equal(1, status)
      assert.matches('^{"checks":%[', out)
      assert.matches('"summary":{"checks":17,"problems":1}}\n$', out)
    end)

    it("raises on unknown options and wrong option types", function()
      assert.error_matches(function()
        diag.run({ jsn = true })
      end, "unknown option 'jsn'")
      assert.error_matches(function()
        diag.run({ json = "yes" })
      end, "must be a boolean")
      assert.has_error(function()
        diag.run("json")
      end)
    end)
  end)

  it("leaks no globals", function()
    local before = globals()
    package.loaded["lazaret.platform.diag"] = nil
    package.loaded["lazaret.platform.report"] = nil
    local fresh = require("lazaret.platform.diag")
    package.loaded["lazaret.platform.diag"] = diag
    package.loaded["lazaret.platform.report"] = report
    fresh.collect(fake_probe())
    assert.are.same(before, globals())
  end)
end)
