-- The built-in qualification suites (spec OR-4), written with the same
-- API as a user's suite (lazaret.qualify). Each sandbox check launches the
-- profile for real through `lazaret run`; the commands need only /bin/sh
-- and cat in the image.
local M = {}

local format, find, match, gmatch = string.format, string.find, string.match, string.gmatch
local ipairs, tostring = ipairs, tostring

local qualify = require("lazaret.qualify")

-- `lazaret diag`'s judged host checks, one qualification check each: a
-- problem fails with what diag says and what to do about it.
function M.host_suite(env)
  local s = qualify.new_suite("host")
  env.host = require("lazaret.platform.diag").collect()
  for _, c in ipairs(env.host) do
    s.api.check(c.name, function(t)
      if c.status ~= "ok" then
        t:fail(c.detail .. (c.fix and ("; fix: " .. c.fix) or ""))
      end
    end)
  end
  return s
end

local function token()
  return format("lzq-%08x%08x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
end

local function sh(t, script, opts)
  return t:run({ "/bin/sh", "-c", script }, opts)
end

-- What the run printed, for a failure's reason (one line, bounded;
-- escaped where it is shown).
local function said(r)
  local out = r.output:gsub("[%c]+", " "):sub(1, 300)
  return format("status %s, output '%s'", tostring(r.status), out)
end

function M.sandbox_suite(env)
  local s = qualify.new_suite("sandbox")
  s.needs_sandbox = true
  local check = s.api.check

  -- The profile resolves for the scratch workspace; without it every
  -- launch below would fail the same way.
  check("configuration", function(t)
    local config = require("lazaret.core.config")
    local cfg, msg = config.load({ config = env.config, profile = env.profile, workspace = env.ws:path() })
    if not cfg then
      env.blocked = "the profile does not resolve"
      t:fail(format("profile '%s': %s", env.profile, msg))
    end
    cfg:close()
  end)

  -- Spec 3.3/3.6: a generation starts (runsc, the prepared lower, the
  -- State Anchor), runs exactly argv, returns its status, and stops.
  check("runsc launch", function(t)
    local mark = token()
    local r = sh(t, "echo " .. mark .. "; exit 7")
    t:expect(r.status == 7 and find(r.output, mark, 1, true), "expected status 7 and the marker: " .. said(r))
  end)

  -- Spec 3.5: the workspace at /workspace, read and written both ways,
  -- the command starting there.
  check("workspace filesystem", function(t)
    local mark = token()
    t:write("from-host", mark .. "\n")
    local r = sh(t, "cd /workspace && test \"$(pwd)\" = /workspace && cat from-host > from-sandbox && cat from-host")
    t:expect(r.status == 0, "copying in the sandbox failed: " .. said(r))
    t:expect(find(r.output, mark, 1, true), "the sandbox did not read the host's file: " .. said(r))
    t:expect(t:read("from-sandbox") == mark .. "\n", "the host does not see the sandbox's file")
  end)

  -- Spec 3.7: the rootless network path: an interface beside loopback
  -- with a default route (slirp4netns), or, with allow_domains, the route
  -- to the egress proxy (10.137.55.10, little-endian in /proc/net/route),
  -- looked at without sending.
  check("rootless network", function(t)
    local r = sh(t, "cat /proc/net/route")
    t:expect(r.status == 0, "reading the route table failed: " .. said(r))
    local way
    for line in gmatch(r.output, "[^\n]+") do
      local iface, dest = match(line, "^(%S+)%s+(%x+)%s")
      if iface and iface ~= "lo" and (dest == "00000000" or dest == "0A37890A") then way = iface end
    end
    t:expect(way, "no default route (nor egress proxy route) through a non-loopback interface: " .. said(r))
  end)

  -- SR-4: the sandbox cannot change the host repository's configuration
  -- or hooks; hooks are sandbox-local.
  check("Git Sentry", function(t)
    local config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
    t:mkdir(".git")
    for _, d in ipairs({ ".git/objects", ".git/refs", ".git/refs/heads", ".git/hooks" }) do t:mkdir(d) end
    t:write(".git/HEAD", "ref: refs/heads/main\n")
    t:write(".git/config", config)
    local r = sh(t, "echo '[core] fsmonitor = evil' >> /workspace/.git/config")
    t:expect(r.status ~= 0, "appending to .git/config succeeded in the sandbox")
    t:expect(t:read(".git/config") == config, ".git/config changed on the host")
    r = sh(t, "echo evil > /workspace/.git/hooks/pre-commit && cat /workspace/.git/hooks/pre-commit")
    t:expect(r.status == 0 and find(r.output, "evil", 1, true), "hooks are not writable as sandbox-local storage: "
      .. said(r))
    t:expect(t:missing(".git/hooks/pre-commit"), "the host's hooks directory changed")
  end)

  -- Spec 3.4: an interactive session gets a terminal of its own.
  check("terminal", function(t)
    local r = sh(t, "test -t 0 && test -t 1 && echo tty-ok", { terminal = true })
    t:expect(r.status == 0 and find(r.output, "tty-ok", 1, true), "the guest has no terminal: " .. said(r))
  end)
  return s
end

return M
