-- `lazaret diag [--json]`: is this host ready to run Lazaret?
--
-- Observes the facts C-REFINEMENT.md lists as runtime dependencies (kernel,
-- subordinate IDs, setuid uidmap helpers, runsc, slirp4netns, device modes
-- of /dev/fuse and /dev/net/tun, unprivileged user namespaces) through the
-- lazaret.core.probe binding, and judges them here. The probes only look;
-- nothing on the host is changed. Each check is
--   {name=, status="ok"|"problem", detail=<one line>, fix=<one line>|nil}
-- and every problem says what to do about it (spec DX-5).
local M = {}

local require = require
local error = error
local format = string.format
local match = string.match
local ipairs = ipairs
local pairs = pairs
local tostring = tostring
local type = type
local io = io -- io.write looked up per call (the host keeps only write)

local report = require("lazaret.platform.report")

M.MIN_KERNEL_MAJOR = 6
M.MIN_KERNEL_MINOR = 9
-- The first runsc release with directfs (C-REFINEMENT.md, runtime deps).
local RUNSC_FAST_SINCE = "20240729"

local function ok(name, detail)
  return { name = name, status = "ok", detail = detail }
end

local function problem(name, detail, fix)
  return { name = name, status = "problem", detail = detail, fix = fix }
end

local function check_kernel(probe)
  local name = "kernel"
  local fix = "Lazaret needs Linux 6.9 or newer on x86-64 (Debian 12: as root, apt-get install "
    .. "-t bookworm-backports linux-image-amd64, then reboot)"
  local k, msg = probe.kernel()
  if not k then
    return problem(name, msg, fix)
  end
  local detail = k.release .. " " .. k.machine
  if k.machine ~= "x86_64" then
    return problem(name, detail .. ": not x86-64", fix)
  end
  if k.major == nil then
    return problem(name, detail .. ": cannot read the version from the release", fix)
  end
  if k.major < M.MIN_KERNEL_MAJOR
    or (k.major == M.MIN_KERNEL_MAJOR and k.minor < M.MIN_KERNEL_MINOR) then
    return problem(name, detail .. ": older than 6.9", fix)
  end
  return ok(name, detail)
end

-- The range a launch maps, judged by the launch's own C function
-- (probe.subid_range, lz_hostprobe_subid_range): the lowest allocation of at
-- least 65536 IDs, taken as it is (adjacent ranges are not joined), refused
-- when it holds ID 0, a system ID (below 1000) or your own.
local function check_subids(probe, id, kind)
  local name = "sub" .. kind
  local file = "/etc/sub" .. kind
  local who = id and (id.user or ("uid " .. id.uid)) or "the invoking user"
  local owner = id and (id.user or tostring(id.uid)) or "<user>"
  local fix = format(
    "as root: usermod %s 100000-165535 %s (pick a range no other user holds; see docs/install.md)",
    kind == "uid" and "--add-subuids" or "--add-subgids", owner)
  local range, msg, errno = probe.subid_range(kind)
  if not range then
    if errno == probe.errno.EINVAL then
      fix = format("as root: correct %s (each line is name:start:count)", file)
    elseif errno == probe.errno.EPERM then
      fix = format("as root: give %s a range in %s from 100000 up that no other user holds, in place "
        .. "of this one (see docs/install.md)", owner, file)
    end
    return problem(name, msg, fix)
  end
  return ok(name, format("%s: %d IDs from %d", who, range.count, range.start))
end

local function check_setuid_helper(probe, name)
  local fix = "as root: apt-get install uidmap"
  local path, msg = probe.locate(name)
  if not path then
    return problem(name, msg, fix)
  end
  local f, fmsg = probe.file(path)
  if not f then
    return problem(name, fmsg, fix)
  end
  if f.uid ~= 0 or not f.setuid then
    return problem(name,
      format("%s is not setuid root (mode %04o, owner uid %d)", path, f.mode, f.uid),
      "as root: apt-get install --reinstall uidmap (it installs " .. path .. " setuid root)")
  end
  return ok(name, path .. " (setuid root)")
end

local TOOL_FIX = {
  runsc = "as root: apt-get install -t bookworm-backports runsc (see docs/install.md)",
  slirp4netns = "as root: apt-get install slirp4netns",
}

local function check_tool(probe, name)
  local t, msg = probe.tool(name)
  if not t then
    return problem(name, msg, TOOL_FIX[name])
  end
  local detail = t.version .. " (" .. t.path .. ")"
  if name == "runsc" then
    local date = match(t.version, "%f[%d](%d%d%d%d%d%d%d%d)%f[%D]")
    if date ~= nil and date < RUNSC_FAST_SINCE then
      detail = detail .. "; before 2024-07-29: no directfs, slow"
    end
  end
  return ok(name, detail)
end

local DEVICE_MODULE = { ["/dev/fuse"] = "fuse", ["/dev/net/tun"] = "tun" }

local function check_device(probe, path)
  local done, msg, errno = probe.device_rw(path)
  if done then
    return ok(path, "read-write for the invoking user")
  end
  local fix = format("as root: chmod 0666 %s (see docs/install.md)", path)
  if errno == probe.errno.ENOENT or errno == probe.errno.ENODEV then
    fix = format("as root: modprobe %s, then chmod 0666 %s (see docs/install.md)",
      DEVICE_MODULE[path], path)
  end
  return problem(path, msg, fix)
end

local function check_userns(probe)
  local done, msg = probe.userns()
  if done then
    return ok("userns", "unprivileged user namespace created")
  end
  return problem("userns", msg,
    "allow unprivileged user namespaces: sysctl user.max_user_namespaces > 0 and, where it "
    .. "exists, kernel.apparmor_restrict_unprivileged_userns=0 (see docs/install.md)")
end

-- Issue 15: runsc holds a host descriptor per cached workspace file and a
-- second once it has read it; a launch raises the soft limit to the hard
-- one and caps runsc's dentry cache to fit (core/runtime/rsplan.c).
M.MIN_DESCRIPTORS = 4096

local function check_descriptors(probe)
  local name = "descriptors"
  local d, msg = probe.descriptors()
  if not d then
    return problem(name, msg, "see docs/install.md (descriptor limit)")
  end
  if d.hard == -1 then
    return ok(name, "no limit; runsc caches as many workspace files as runsc_dcache allows")
  end
  local detail = format("limit %d (hard; a launch raises the soft limit %s to it): runsc caches at most "
    .. "%d workspace files, more are looked up again, never refused", d.hard,
    d.soft == -1 and "unlimited" or tostring(d.soft), d.dcache_cap)
  if d.hard < M.MIN_DESCRIPTORS then
    return problem(name, detail .. format("; below %d, large workspaces are slow", M.MIN_DESCRIPTORS),
      format("raise the hard limit on open files to at least %d (ulimit -Hn; limits.conf nofile; "
        .. "see docs/install.md)", M.MIN_DESCRIPTORS))
  end
  return ok(name, detail)
end

-- What a profile with allow_domains may hold of the host's TCP memory
-- through the egress proxy: a quarter of the kernel's pressure threshold
-- (net.ipv4.tcp_mem), in connections and buffers, for every Domain's proxy
-- together (core/net/egressproxy.h).
local function check_egress(probe)
  local name = "egress proxy"
  local e, msg = probe.egress()
  if not e then
    return problem(name, msg, "a launch with allow_domains reads /proc/sys/net/ipv4/tcp_mem; make it "
      .. "readable (see docs/configuration.md, network)")
  end
  return ok(name, format("at most %d connections at once for all your Domains, a %d KiB receive buffer "
    .. "each from upstream (a quarter of the host's TCP memory pressure threshold, %d MiB)",
    e.max_connections, e.upstream_rcvbuf // 1024, e.tcp_pressure // (1024 * 1024)))
end

-- The memory every sandbox of the host may hold together, each its share
-- when they need more (core/runtime/memwatch.h).
local function check_memory(probe)
  local name = "sandbox memory"
  local m, msg = probe.memory()
  if not m then
    return problem(name, msg, "a launch reads the host's memory with sysinfo(2) to bound the sandboxes' "
      .. "memory; it does not start without it")
  end
  local mib = 1024 * 1024
  return ok(name, format("at most %d MiB for all your sandboxes together (half of the host's memory), "
    .. "counted in chunks of %d MiB; when they need more, each may hold its share (that divided by the "
    .. "sandboxes running)", m.budget // mib, m.chunk // mib))
end

-- The Runtime Root ($XDG_RUNTIME_DIR/lazaret) a launch opens or makes:
-- refused unless XDG_RUNTIME_DIR is set, absolute and free of symlinks,
-- and the root, once made, is a directory of yours with mode 0700.
local function check_runtime_root(probe, id)
  local name = "runtime root"
  local rr, msg = probe.runtime_root()
  if not rr then
    return problem(name, msg, "set XDG_RUNTIME_DIR to a private directory of yours (a login "
      .. "session does; see docs/install.md)")
  end
  if not rr.exists and not rr.creatable then
    return problem(name, rr.path .. " does not exist and cannot be made: nothing on its way is a "
      .. "directory you may write", "set XDG_RUNTIME_DIR to a private directory of yours (a login "
      .. "session makes /run/user/<uid>; see docs/install.md)")
  end
  if not rr.exists then
    return ok(name, rr.path .. " (made 0700 at the first launch)")
  end
  if rr.type ~= "directory" or (id and rr.uid ~= id.uid) or rr.mode ~= 448 then
    return problem(name, format("%s is not a directory of yours with mode 0700 (%s, owner uid %d, "
      .. "mode %04o)", rr.path, rr.type, rr.uid, rr.mode),
      format("as its owner: chmod 0700 %s, or remove it when no sandbox runs (Lazaret makes it "
        .. "again)", rr.path))
  end
  return ok(name, rr.path)
end

-- Libraries Lazaret opens when first used (core/util/lazylib.h): a launch
-- needs libgit2 (the workspace router), `image prepare` libarchive. Loading
-- them here tells before either refuses.
local LIBRARY_PACKAGE = { libgit2 = "libgit2-1.5", libarchive = "libarchive13" }

local function check_library(probe, name)
  local l, msg = probe.library(name)
  if not l then
    return problem(name, msg, format("install the package that provides it (Debian 12: apt install %s)",
      LIBRARY_PACKAGE[name]))
  end
  return ok(name, l.soname .. " loads")
end

-- The helpers that parse what the sandbox sends (the workspace router, the
-- egress proxy, the canary responder) restrict their files with Landlock
-- where the kernel has it (core/proc/confine.h); without it they run, their
-- sockets filtered, with all of your file authority.
local function check_landlock(probe)
  local name = "landlock"
  local abi = probe.landlock()
  if abi == 0 then
    return problem(name, "the kernel has no Landlock: the workspace router, the egress proxy and the "
      .. "canary responder run with your file authority (a bug in one reaches every file you can write)",
      "boot a kernel with Landlock enabled (landlock in the lsm= kernel parameter; see docs/install.md)")
  end
  if abi < 6 then
    return ok(name, format("ABI %d: the router, the egress proxy and the canary responder are restricted "
      .. "in files and TCP; signals need ABI 6 (Linux 6.12)", abi))
  end
  return ok(name, format("ABI %d: the router, the egress proxy and the canary responder are restricted "
    .. "in files, TCP and signals", abi))
end

-- diag.collect([probe]) -> list of checks, in a fixed order. probe defaults
-- to the lazaret.core.probe binding; specs pass a fake with the same shape.
function M.collect(probe)
  probe = probe or require("lazaret.core.probe")
  local id = probe.identity()
  return {
    check_kernel(probe),
    check_subids(probe, id, "uid"),
    check_subids(probe, id, "gid"),
    check_setuid_helper(probe, "newuidmap"),
    check_setuid_helper(probe, "newgidmap"),
    check_tool(probe, "runsc"),
    check_tool(probe, "slirp4netns"),
    check_device(probe, "/dev/fuse"),
    check_device(probe, "/dev/net/tun"),
    check_userns(probe),
    check_descriptors(probe),
    check_egress(probe),
    check_memory(probe),
    check_runtime_root(probe, id),
    check_library(probe, "libgit2"),
    check_library(probe, "libarchive"),
    check_landlock(probe),
  }
end

local RUN_OPTIONS = { json = "boolean", report = "string", probe = "table" }

-- diag.run(opts) -> exit status: writes the report to stdout, returns 0
-- when every check is ok, else 1. opts = {json = boolean} or {report =
-- path}: the user's report at path runs instead of the built-in one
-- (lazaret.platform.userreport, its exit statuses). opts.probe is a test
-- seam passed to collect.
function M.run(opts)
  opts = opts == nil and {} or opts
  if type(opts) ~= "table" then
    error("diag.run: opts must be a table", 2)
  end
  for k, v in pairs(opts) do
    if RUN_OPTIONS[k] == nil then
      error(format("diag.run: unknown option '%s'", tostring(k)), 2)
    end
    if type(v) ~= RUN_OPTIONS[k] then
      error(format("diag.run: option '%s' must be a %s", k, RUN_OPTIONS[k]), 2)
    end
  end
  if opts.report ~= nil then
    if opts.json then
      error("diag.run: options 'json' and 'report' exclude each other", 2)
    end
    return require("lazaret.platform.userreport").run(opts.report, { probe = opts.probe })
  end
  local checks = M.collect(opts.probe)
  io.write(opts.json and report.json(checks) or report.text(checks))
  for _, c in ipairs(checks) do
    if c.status ~= "ok" then
      return 1
    end
  end
  return 0
end

return M
