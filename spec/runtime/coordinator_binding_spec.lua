-- busted spec for bindings/runtime/l_coordinator.c (lazaret.core.coordinator)
-- and its views bindings/store/l_dstore.c (lazaret.core.dstore) and
-- bindings/runtime/l_rs.c (lazaret.core.rs), on a real Domain in a
-- temporary directory. Needs the test module (busted --cpath='<builddir>/?.so'),
-- XDG_RUNTIME_DIR set to a private directory (scripts/test.sh does) and
-- gVisor's runsc in a system directory: without it coordinator.open fails
-- and so does this spec. No Runtime Supervisor is started here (that needs
-- a prepared image; tests/e2e does it): every step that depends on one is
-- checked to refuse.
require("lazaret_spec")
local config = require("lazaret.core.config")
local coordinator = require("lazaret.core.coordinator")
local dstore = require("lazaret.core.dstore")
local rs = require("lazaret.core.rs")
local errno = require("lazaret.core.errno")

-- A profile whose image was never prepared.
local IMAGE = "docker://registry.invalid/lazaret/never-prepared:1"

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

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

-- r, msg, code is a refusal with exactly this errno and a message matching pattern.
local function assert_refused(want_errno, pattern, r, msg, code)
  assert.is_nil(r, "expected a refusal, got " .. tostring(r))
  assert.is_string(msg)
  assert.are.equal(want_errno, code, "errno " .. tostring(code) .. " (" .. tostring(errno.name(code or 0))
    .. ") for: " .. tostring(msg))
  if pattern then assert.matches(pattern, msg) end
end

describe("lazaret.core.coordinator", function()
  local dir, cfg, runtime_domain

  -- A resolved profile for a workspace in dir, its Domain's runtime
  -- directory under XDG_RUNTIME_DIR.
  local function load_config()
    local c = assert(config.load({ config = dir .. "/c.toml", profile = "dev", workspace = dir .. "/ws" }))
    local s = c:summary()
    runtime_domain = s.runtime_root .. "/domains/" .. s.domain_id
    return c
  end

  -- An open coordinator past bootstrap recovery (runtime/recovery.lua),
  -- so a generation may begin.
  local function open()
    local hc, msg, code = coordinator.open(cfg)
    assert(hc, "coordinator.open: " .. tostring(msg) .. " (errno " .. tostring(code) .. ")")
    assert.is_true(hc:recovered())
    return hc
  end

  local function begun()
    local hc = open()
    assert.is_true(hc:begin())
    return hc, dstore.of(hc), rs.of(hc)
  end

  before_each(function()
    dir = tmpdir()
    assert(os.execute("mkdir " .. dir .. "/ws"))
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n'
      .. '[profiles.dev]\nimage = "' .. IMAGE .. '"\n')
    cfg = load_config()
  end)

  after_each(function()
    -- Every handle of the Domain is gone before its directories go. The
    -- configuration is left to the collector: a coordinator still open
    -- (a view kept it) is collected first and must not outlive it.
    cfg = nil
    collectgarbage()
    collectgarbage()
    os.execute("rm -rf " .. dir)
    if runtime_domain then os.execute("rm -rf " .. runtime_domain) end
    runtime_domain = nil
  end)

  it("usage counts this process's page faults and CPU time", function()
    local faults, cpu = coordinator.usage()
    assert.is_true(math.type(faults) == "integer" and faults > 0)
    assert.is_true(type(cpu) == "number" and cpu > 0)
    -- Touching fresh memory adds faults; the count only grows.
    local t = {}
    for i = 1, 20000 do t[i] = string.rep("x", 64) .. i end
    local more, more_cpu = coordinator.usage()
    assert.is_true(more > faults, "faults " .. faults .. " then " .. more)
    assert.is_true(more_cpu >= cpu)
  end)

  it("needs XDG_RUNTIME_DIR from the harness", function()
    assert.is_string(os.getenv("XDG_RUNTIME_DIR"))
  end)

  it("exports the documented functions only", function()
    local names = {}
    for k, v in pairs(coordinator) do
      names[#names + 1] = k .. ":" .. type(v)
    end
    table.sort(names)
    assert.are.same({ "detach:function", "notify:function", "open:function", "stop_requested:function",
                      "usage:function" }, names)
    names = {}
    for k, v in pairs(dstore) do
      names[#names + 1] = k .. ":" .. type(v)
    end
    table.sort(names)
    assert.are.same({ "of:function", "roles:table" }, names)
    assert.are.same({ "prepared_lower", "state_anchor", "sandbox", "runtime_supervisor", "attached_runsc",
      "host_coordinator", "connectivity_helper", "network" }, dstore.roles)
    names = {}
    for k, v in pairs(rs) do
      names[#names + 1] = k .. ":" .. type(v)
    end
    assert.are.same({ "of:function" }, names)
  end)

  describe("open", function()
    it("opens the Domain of a resolved profile, before any generation", function()
      local hc = open()
      assert.are.equal("lazaret.hc (generation 0)", tostring(hc))
      assert.are.equal(0, hc:generation())
      assert.is_nil(hc:readiness())
      assert.is_false(getmetatable(hc))
      hc:close()
    end)

    it("returns nil, msg, EBUSY while another coordinator holds the Domain", function()
      local hc = open()
      assert_refused(errno.EBUSY, "another Host Coordinator holds this Domain", coordinator.open(cfg))
      -- The same Domain through a second configuration handle.
      local other <close> = load_config()
      assert_refused(errno.EBUSY, "another Host Coordinator", coordinator.open(other))
      hc:close()
      -- Closing released the flock.
      local again = open()
      again:close()
    end)

    it("releases the Domain when a <close> variable goes out of scope", function()
      do
        local hc <close> = open()
        assert_refused(errno.EBUSY, nil, coordinator.open(cfg))
      end
      open():close()
    end)

    it("returns nil, msg, EINVAL for a configuration without a profile", function()
      local plain <close> = assert(config.load({ config = dir .. "/c.toml" }))
      assert_refused(errno.EINVAL, "needs a resolved profile", coordinator.open(plain))
    end)

    it("raises without a configuration handle", function()
      assert.has_error(function() coordinator.open() end)
      assert.has_error(function() coordinator.open(dir .. "/c.toml") end)
      assert.has_error(function() coordinator.open({}) end)
      local closed = assert(config.load({ config = dir .. "/c.toml" }))
      closed:close()
      assert.has_error(function() coordinator.open(closed) end)
    end)

    it("raises on notify without a string", function()
      assert.has_error(function() coordinator.notify() end)
      assert.has_error(function() coordinator.notify({}) end)
    end)
  end)

  describe("bootstrap recovery", function()
    it("must pass before a generation begins", function()
      local hc = assert(coordinator.open(cfg))
      assert_refused(errno.EPROTO, "only after bootstrap recovery", hc:begin())
      assert.are.equal(0, hc:lost_generation())
      assert.are.same({}, hc:release_lost_leases())
      assert.are.same({}, hc:clean_runtime())
      assert.is_true(hc:recovered())
      assert.is_true(hc:begin())
      -- Only before a generation begins; only the lost generation.
      assert_refused(errno.EPROTO, "only before a generation begins", hc:lost_generation())
      assert_refused(errno.EPROTO, "only before a generation begins", hc:clean_runtime())
      hc:close()
      hc = assert(coordinator.open(cfg))
      assert_refused(errno.EINVAL, "is not the lost one", hc:record_lost(1))
      assert.has_error(function() hc:record_lost("x") end)
      hc:close()
    end)
  end)

  -- A profile that persists only /usr, with the anchors of /usr and of a
  -- /home an earlier profile persisted; the developer's file in the latter.
  local droot
  local function anchored()
    write(dir .. "/c.toml", 'version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n'
      .. '[profiles.dev]\nimage = "' .. IMAGE .. '"\npersistent_dirs = ["/usr"]\n')
    cfg = load_config()
    local s = cfg:summary()
    local hc = open()
    droot = s.storage_root .. "/domains/" .. s.domain_id
    assert(os.execute("mkdir -p " .. droot .. "/anchor/home/upper/dev " .. droot .. "/anchor/home/work "
      .. droot .. "/anchor/usr/upper " .. droot .. "/anchor/usr/work && echo precious > " .. droot
      .. "/anchor/home/upper/dev/notes"))
    return hc
  end
  local function present(name)
    return os.execute("test -e " .. droot .. "/anchor/" .. name) == true
  end

  describe("session.serve", function()
    -- While the loop serves, the coordinator is held (every use from route
    -- raises); the hold ends with the call, whatever it returned.
    it("refuses without a published generation and leaves the coordinator usable", function()
      local session = require("lazaret.core.session")
      local hc = open()
      local called = false
      assert_refused(errno.EPROTO, "serving needs a published generation",
        session.serve(hc, function() called = true end))
      assert.is_false(called)
      assert.is_true(hc:begin())
      hc:close()
      assert.are.equal("lazaret.hc (closed)", tostring(hc))
    end)
  end)

  describe("held by session.serve", function()
    -- While session.serve's route runs, C holds the coordinator across Lua:
    -- every use of it or of its views raises (a use there could free or
    -- reenter what the serve loop holds), and the hold ends with the call.
    local spec = require("lazaret_spec")
    local function methods(x)
      local names = {}
      for name in pairs(debug.getmetatable(x).__index) do
        names[#names + 1] = name
      end
      table.sort(names)
      return names
    end

    it("refuses every method of the coordinator and its views", function()
      local hc = open()
      local views = { hc = hc, store = dstore.of(hc), rs = rs.of(hc) }
      local seen = 0
      local ok, e = spec.as_serving(hc, function()
        for what, x in pairs(views) do
          for _, name in ipairs(methods(x)) do
            local used, err = pcall(x[name], x)
            assert.is_false(used, what .. ":" .. name .. " ran while serving")
            local want = name == "close" and "the coordinator is in use %(inside store:batch or session.serve%)"
              or "attempt to use the coordinator while session.serve runs"
            assert.matches(want, tostring(err), 1, false, what .. ":" .. name)
            seen = seen + 1
          end
        end
        assert.has_error(function() dstore.of(hc) end)
        assert.has_error(function() rs.of(hc) end)
        local s = require("lazaret.core.session")
        assert.error_matches(function() s.serve(hc, function() end) end, "while session.serve runs")
      end)
      assert.is_true(ok, tostring(e))
      assert.is_true(seen > 30, "only " .. seen .. " methods")
      -- Released: usable and closable again.
      assert.is_true(hc:begin())
      assert.are.equal(1, hc:generation())
      hc:close()
    end)

    it("releases the coordinator when the route raises", function()
      local hc = open()
      local ok, e = spec.as_serving(hc, function() error("route failed") end)
      assert.is_false(ok)
      assert.matches("route failed", tostring(e))
      assert.is_true(hc:begin())
      hc:close()
      assert.are.equal("lazaret.hc (closed)", tostring(hc))
    end)
  end)

  describe("verify", function()
    -- The core reports each row in the middle of its walk (anchor/ open):
    -- a memory error while a row is added must not unwind through it.
    it("leaks no descriptor when a row cannot be added", function()
      local spec = require("lazaret_spec")
      local lfs = require("lfs")
      local function descriptors()
        local n = 0
        for _ in lfs.dir("/proc/self/fd") do n = n + 1 end
        return n
      end
      local hc = anchored()
      local rows = assert(hc:verify())
      assert.is_true(#rows > 3)
      collectgarbage()
      local before = descriptors()
      local failed = 0
      for k = 0, 2000 do
        local ok, e = spec.with_alloc_limit(k, function() return assert(hc:verify()) end)
        if ok then break end
        assert.matches("memory", tostring(e))
        failed = failed + 1
      end
      assert.is_true(failed > #rows)
      collectgarbage()
      collectgarbage()
      assert.are.equal(before, descriptors())
      hc:close()
    end)
  end)

  describe("State Anchor reset", function()
    it("refuses before bootstrap recovery passed", function()
      local hc = assert(coordinator.open(cfg))
      local plan = assert(hc:reset_plan({}))
      assert_refused(errno.EPROTO, "only after bootstrap recovery passed", hc:reset(plan))
      hc:close()
    end)

    it("discards what the last plan named, and only that", function()
      local hc = anchored()
      assert_refused(errno.EINVAL, "/home is not a persistent directory of this profile", hc:reset_plan({ "/home" }))
      -- No plan stands: a list Lua made is no reset.
      assert.error_matches(function() hc:reset({ "/home" }) end,
        "hc:reset takes the list the last hc:reset_plan returned: there is none")
      assert.are.same({ "/usr" }, hc:reset_plan({ "/usr/" }))
      assert.error_matches(function() hc:reset({ "/home" }) end,
        "hc:reset takes exactly the list the last hc:reset_plan returned; nothing was reset")
      -- The plan is used up by that refusal too.
      assert.error_matches(function() hc:reset({ "/usr" }) end, "there is none")
      assert.is_true(present("home/upper/dev/notes"))
      assert.is_true(present("usr"))
      local plan = hc:reset_plan({ "/usr" })
      assert.is_true(hc:reset(plan))
      assert.is_false(present("usr"))
      assert.is_true(present("home/upper/dev/notes"))
      hc:close()
    end)

    -- A profile may list 256 persistent directories, and earlier
    -- profiles leave anchors of their own: a plan of 70 is reset whole.
    it("resets a plan of more anchors than a fixed array held (70)", function()
      local hc = anchored()
      local made = {}
      for i = 1, 70 do made[#made + 1] = droot .. "/anchor/p" .. i .. "/upper" end
      assert(os.execute("mkdir -p " .. table.concat(made, " ")))
      local plan = assert(hc:reset_plan({}))
      assert.is_true(#plan >= 70)
      assert.is_true(hc:reset(plan))
      assert.is_false(present("p70"))
      assert.is_false(present("usr"))
      hc:close()
    end)

    it("raises on lists that are not plain lists of strings", function()
      local hc = anchored()
      assert.error_matches(function() hc:reset_plan(setmetatable({}, { __index = function() return "/usr" end,
        __len = function() return 1 end })) end, "must be a plain table")
      assert.error_matches(function() hc:reset_plan({ "/usr\0/x" }) end, "path 1 must be a string without NUL bytes")
      assert.error_matches(function() hc:reset_plan({ 1 }) end, "path 1 must be a string")
      assert.is_true(present("usr"))
      hc:close()
    end)
  end)

  describe("generation", function()
    it("is 0 before begin and the new generation after", function()
      local hc = open()
      assert.are.equal(0, hc:generation())
      assert.is_true(hc:begin())
      local gen = hc:generation()
      assert.are.equal("integer", math.type(gen))
      assert.is_true(gen > 0)
      assert.are.equal("lazaret.hc (generation " .. gen .. ")", tostring(hc))
      assert_refused(errno.EPROTO, "has begun already", hc:begin())
      assert.are.equal(gen, hc:generation())
      hc:close()
    end)

    it("continues after a closed coordinator's generation, which close recorded failed", function()
      local hc = open()
      assert.is_true(hc:begin())
      local first = hc:generation()
      hc:close()
      hc = open()
      assert.is_true(hc:begin())
      assert.is_true(hc:generation() > first)
      hc:close()
    end)

    it("refuses store transitions before begin with EPROTO", function()
      local hc = open()
      local store = dstore.of(hc)
      assert_refused(errno.EPROTO, "no generation has begun", store:intent("host_coordinator"))
      assert_refused(errno.EPROTO, "no generation has begun", store:phase("sandbox"))
      assert_refused(errno.EPROTO, "no generation has begun", store:generation("stopping"))
      assert_refused(errno.EPROTO, "no generation has begun", hc:lease_acquire())
      assert_refused(errno.EPROTO, "no generation has begun", hc:publish())
      hc:close()
    end)
  end)

  describe("store batches", function()
    it("refuse every action inside and commit the transitions together", function()
      local hc, store, r = begun()
      local refused = {}
      assert.is_true(store:batch(function()
        assert.is_true(store:intent("host_coordinator"))
        for name, f in pairs({
          lease_acquire = function() return hc:lease_acquire() end,
          lease_release = function() return hc:lease_release() end,
          publish = function() return hc:publish() end,
          spawn = function() return r:spawn() end,
          expect = function() return r:expect("mounts") end,
          ack = function() return r:ack("attached_runsc") end,
          stop = function() return r:stop() end,
        }) do
          assert_refused(errno.EBUSY, "inside a Domain Store batch", f())
          refused[#refused + 1] = name
        end
        assert_refused(errno.EBUSY, "already open", store:batch(function() end))
        assert.is_true(store:intent("sandbox"))
      end))
      assert.are.equal(7, #refused)
      assert.are.equal("intent", store:phase("host_coordinator"))
      assert.are.equal("intent", store:phase("sandbox"))
      -- Outside a batch the same action is judged on its own merits again.
      assert.is_true(hc:lease_release())
      hc:close()
    end)

    -- Recovery commits the catalog and removes trees on the Domain
    -- Store's evidence: never on transitions a batch has not made durable.
    it("refuse bootstrap recovery and reset inside", function()
      local hc = open()
      local store = dstore.of(hc)
      local refused = {}
      assert.is_true(store:batch(function()
        for name, f in pairs({
          lost_generation = function() return hc:lost_generation() end,
          release_lost_leases = function() return hc:release_lost_leases() end,
          clean_runtime = function() return hc:clean_runtime() end,
          retire_lost = function() return hc:retire_lost() end,
          reset = function() return hc:reset(assert(hc:reset_plan({}))) end,
        }) do
          assert_refused(errno.EBUSY, "inside a Domain Store batch", f())
          refused[#refused + 1] = name
        end
      end))
      assert.are.equal(5, #refused)
      -- Outside, each is judged on its own merits again.
      assert.is_table(hc:release_lost_leases())
      assert.is_true(hc:reset(assert(hc:reset_plan({}))))
      hc:close()
    end)

    -- The batch's C frame holds the coordinator while fn runs: closing it
    -- there would free it under the commit (a use after free).
    it("refuse hc:close inside, and the coordinator stays open", function()
      local hc = open()
      local store = dstore.of(hc)
      local ok, e = pcall(store.batch, store, function() hc:close() end)
      assert.is_false(ok)
      assert.matches("the coordinator is in use %(inside store:batch or session.serve%)", tostring(e))
      assert.are.equal("lazaret.hc (generation 0)", tostring(hc))
      ok, e = pcall(store.batch, store, function()
        local h <close> = hc -- luacheck: ignore
      end)
      assert.is_false(ok)
      assert.matches("the coordinator is in use", tostring(e))
      -- Still usable, and closable once the batch returned.
      assert.is_true(store:batch(function() assert.are.equal(0, hc:generation()) end))
      assert.is_true(hc:begin())
      hc:close()
      assert.are.equal("lazaret.hc (closed)", tostring(hc))
      assert.is_true(open() ~= nil) -- the Domain was released
    end)

    it("raise an error from inside after committing what came before it", function()
      local hc, store = begun()
      local ok, e = pcall(store.batch, store, function()
        assert.is_true(store:intent("network"))
        error("stop here", 0)
      end)
      assert.is_false(ok)
      assert.are.equal("stop here", e)
      assert.are.equal("intent", store:phase("network"))
      assert.is_true(store:batch(function() assert.is_true(store:intent("sandbox")) end))
      hc:close()
    end)
  end)

  describe("prepared lower", function()
    it("lower_lookup fails with a clear message when the image was never prepared", function()
      local hc = begun()
      assert_refused(errno.ENOENT, "^image '" .. IMAGE:gsub("%p", "%%%0") .. "' is not prepared: run "
        .. "'lazaret image prepare " .. IMAGE:gsub("%p", "%%%0") .. "'$", hc:lower_lookup())
      hc:close()
    end)

    it("refuses the lease before the prepared_lower intent and its artifact", function()
      local hc, store = begun()
      assert_refused(errno.EPROTO, "needs prepared%-lower intent with its artifact recorded first",
        hc:lease_acquire())
      assert.is_true(store:intent("prepared_lower"))
      -- Intent alone is not enough: the artifact names the lease.
      assert_refused(errno.EPROTO, "needs prepared%-lower intent", hc:lease_acquire())
      assert_refused(errno.EPROTO, "no prepared artifact has been looked up", store:record("artifact"))
      assert_refused(errno.EPROTO, "no catalog lease is held", store:record("lease"))
      assert_refused(errno.ESTALE, "a bare intent never becomes active", store:activate("prepared_lower"))
      assert.are.equal("intent", store:phase("prepared_lower"))
      hc:close()
    end)

    it("releases no lease it does not hold", function()
      local hc = begun()
      assert.is_true(hc:lease_release())
      hc:close()
    end)
  end)

  describe("Runtime Supervisor", function()
    it("refuses rs:spawn before the prepared lower is active", function()
      local hc, store, r = begun()
      assert_refused(errno.EPROTO, "needs an active, leased prepared lower", r:spawn())
      assert.is_true(store:intent("prepared_lower"))
      for _, role in ipairs({ "state_anchor", "runtime_supervisor", "attached_runsc", "sandbox",
        "connectivity_helper", "network" }) do
        assert.is_true(store:intent(role))
      end
      assert_refused(errno.EPROTO, "needs an active, leased prepared lower", r:spawn())
      assert.is_false(store:phase("prepared_lower") == "active")
      hc:close()
    end)

    it("refuses rs:ack before anything was staged", function()
      local hc, store, r = begun()
      assert_refused(errno.EPROTO, "no connectivity_helper identity has been reported", r:ack("connectivity_helper"))
      assert_refused(errno.EPROTO, "no attached_runsc identity has been reported", r:ack("attached_runsc"))
      assert.is_true(store:intent("attached_runsc"))
      assert_refused(errno.EPROTO, "no attached_runsc identity", r:ack("attached_runsc"))
      hc:close()
    end)

    it("has no record to expect without a Runtime Supervisor", function()
      local hc, _, r = begun()
      for _, kind in ipairs({ "mounts", "helper-staged", "staged", "ready" }) do
        assert_refused(errno.ESRCH, "the Runtime Supervisor ended early", r:expect(kind))
      end
      hc:close()
    end)

    it("stops no Runtime Supervisor that never started", function()
      local hc, _, r = begun()
      assert.is_true(r:stop())
      hc:close()
    end)

    it("refuses every identity the Runtime Supervisor did not report", function()
      local hc, store = begun()
      for _, role in ipairs({ "runtime_supervisor", "connectivity_helper", "attached_runsc", "sandbox" }) do
        assert.is_true(store:intent(role))
      end
      assert_refused(errno.EINVAL, "the broker stages the Runtime Supervisor", store:stage("runtime_supervisor"))
      assert_refused(errno.EPROTO, "no connectivity_helper identity", store:stage("connectivity_helper"))
      assert_refused(errno.EPROTO, "no attached_runsc identity", store:stage("attached_runsc"))
      assert_refused(errno.EPROTO, "no sandbox identity", store:stage("sandbox"))
      assert_refused(errno.EPROTO, "no runtime_supervisor identity", store:commit("runtime_supervisor"))
      assert_refused(errno.EPROTO, "no attached_runsc identity", store:commit("attached_runsc"))
      assert_refused(errno.EINVAL, "has no process this coordinator acquires", store:stage("state_anchor"))
      assert_refused(errno.EPROTO, "the Runtime Supervisor has reported no mounts", store:record("mounts"))
      hc:close()
    end)
  end)

  describe("network and publication", function()
    it("refuses the attestation before the readiness report", function()
      local hc, store = begun()
      assert_refused(errno.EPROTO, "needs the Runtime Supervisor's readiness report", hc:attest_network())
      assert.is_nil(hc:readiness())
      assert_refused(errno.EPROTO, "the network is not attested", store:record("readiness"))
      hc:close()
    end)

    it("refuses store:activate('network') without readiness", function()
      local hc, store = begun()
      assert_refused(errno.ENOENT, "no network participant", store:activate("network"))
      assert.is_true(store:intent("network"))
      assert_refused(errno.ESTALE, "a bare intent never becomes active", store:activate("network"))
      -- The network enters with the committed Runtime Supervisor only.
      assert_refused(errno.EPROTO, "no runtime_supervisor identity", store:enter("network"))
      assert.are.equal("intent", store:phase("network"))
      hc:close()
    end)

    it("refuses hc:publish before the network is active", function()
      local hc, store = begun()
      assert_refused(errno.ESTALE, "network participant is absent", hc:publish())
      assert.is_true(store:intent("network"))
      assert_refused(errno.ESTALE, "network participant", hc:publish())
      -- The refused publication left no socket behind: a retry is not "published already".
      assert_refused(errno.ESTALE, "network participant", hc:publish())
      hc:close()
    end)
  end)

  describe("store", function()
    it("reports the phases a participant goes through", function()
      local hc, store = begun()
      for _, role in ipairs(dstore.roles) do
        assert.is_false(store:phase(role), role)
      end
      assert.is_true(store:intent("host_coordinator"))
      assert.are.equal("intent", store:phase("host_coordinator"))
      assert.is_true(store:enter("host_coordinator"))
      assert.are.equal("acquiring", store:phase("host_coordinator"))
      assert.is_true(store:activate("host_coordinator"))
      assert.are.equal("active", store:phase("host_coordinator"))
      assert.is_true(store:release("host_coordinator"))
      assert.are.equal("release", store:phase("host_coordinator"))
      assert.is_true(store:clean("host_coordinator"))
      assert.are.equal("clean", store:phase("host_coordinator"))
      -- A bare intent is cleaned directly.
      assert.is_true(store:intent("sandbox"))
      assert.are.equal("intent", store:phase("sandbox"))
      assert.is_true(store:clean("sandbox"))
      assert.are.equal("clean", store:phase("sandbox"))
      assert.is_false(store:phase("network"))
      hc:close()
    end)

    it("refuses store:clean of a role that has not reached release", function()
      local hc, store = begun()
      assert.is_true(store:intent("host_coordinator"))
      assert.is_true(store:enter("host_coordinator"))
      assert.is_true(store:activate("host_coordinator"))
      assert_refused(errno.ESTALE, "active %-> clean refused", store:clean("host_coordinator"))
      assert.are.equal("active", store:phase("host_coordinator"))
      assert_refused(errno.ENOENT, nil, store:clean("runtime_supervisor"))
      hc:close()
    end)

    it("refuses the State Anchor's unmount without its participant", function()
      local hc, store = begun()
      assert_refused(errno.ENOENT, "no state_anchor participant", store:anchor_unmounted())
      hc:close()
    end)

    it("refuses existing-process edges other than host_coordinator and network", function()
      local hc, store = begun()
      for _, role in ipairs({ "sandbox", "state_anchor", "prepared_lower", "runtime_supervisor" }) do
        assert.is_true(store:intent(role))
        assert_refused(errno.EINVAL, "is not a direct existing%-process edge", store:enter(role))
      end
      hc:close()
    end)

    it("ends a generation stopped only when every participant is clean", function()
      local hc, store = begun()
      assert.is_true(store:intent("host_coordinator"))
      assert.is_true(store:enter("host_coordinator"))
      assert.is_true(store:activate("host_coordinator"))
      assert.is_true(store:generation("stopping"))
      assert_refused(errno.EBUSY, "participant host_coordinator is active", store:generation("stopped"))
      assert.is_true(store:release("host_coordinator"))
      assert.is_true(store:clean("host_coordinator"))
      assert.is_true(store:generation("stopped"))
      assert_refused(errno.ESTALE, "not a forward move", store:generation("failed"))
      hc:close()
    end)

    it("raises on unknown role names, evidence names, states and expect kinds", function()
      local hc, store, r = begun()
      for _, m in ipairs({ "intent", "stage", "commit", "enter", "activate", "release", "clean", "phase" }) do
        assert.error_matches(function() store[m](store, "bogus") end, "unknown role 'bogus'")
        assert.error_matches(function() store[m](store, "Sandbox") end, "unknown role 'Sandbox'")
        assert.error_matches(function() store[m](store, "sandbox\0x") end, "contains a NUL byte")
        assert.has_error(function() store[m](store) end)
        assert.has_error(function() store[m](store, {}) end)
      end
      assert.error_matches(function() store:record("bogus") end, "invalid option 'bogus'")
      assert.error_matches(function() store:record("sandbox") end, "invalid option 'sandbox'")
      assert.has_error(function() store:record() end)
      assert.error_matches(function() store:generation("published") end, "invalid option 'published'")
      assert.error_matches(function() store:generation("starting") end, "invalid option 'starting'")
      assert.error_matches(function() r:expect("bogus") end, "invalid option 'bogus'")
      assert.error_matches(function() r:expect("stopped") end, "invalid option 'stopped'")
      assert.has_error(function() r:expect() end)
      assert.error_matches(function() r:ack("sandbox") end, "invalid option 'sandbox'")
      assert.error_matches(function() r:ack("runtime_supervisor") end, "invalid option")
      assert.has_error(function() r:ack() end)
      hc:close()
    end)

    it("raises when a view's method is called on something else", function()
      local hc, store, r = begun()
      assert.has_error(function() store.phase(r, "sandbox") end)
      assert.has_error(function() r.stop(store) end)
      assert.has_error(function() store.phase(hc, "sandbox") end)
      assert.has_error(function() hc.generation(store) end)
      assert.has_error(function() dstore.of(cfg) end)
      assert.has_error(function() rs.of({}) end)
      assert.has_error(function() dstore.of() end)
      hc:close()
    end)
  end)

  describe("views", function()
    it("show their type and hide their metatables", function()
      local hc, store, r = begun()
      assert.are.equal("lazaret.dstore", tostring(store))
      assert.are.equal("lazaret.rs", tostring(r))
      assert.is_false(getmetatable(store))
      assert.is_false(getmetatable(r))
      hc:close()
    end)

    it("keep the coordinator alive", function()
      local hc = open()
      assert.is_true(hc:begin())
      local store = dstore.of(hc)
      hc = nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      assert.is_true(store:intent("sandbox"))
      assert.are.equal("intent", store:phase("sandbox"))
      -- The coordinator still holds the Domain.
      assert_refused(errno.EBUSY, nil, coordinator.open(cfg))
    end)
  end)

  describe("close", function()
    it("keeps the configuration it borrows open until it is closed itself", function()
      local hc = begun()
      assert.has_error(function() cfg:close() end,
        "the configuration is in use (by an open coordinator, or an image.prepare under way): close it after that")
      assert.is_table(cfg:summary()) -- still usable
      assert.is_nil(hc:lower_lookup()) -- and the coordinator still reads it
      hc:close()
      cfg:close()
      assert.has_error(function() cfg:summary() end, "attempt to use a closed configuration")
    end)

    it("is idempotent and shows (closed)", function()
      local hc = begun()
      hc:close()
      hc:close()
      assert.are.equal("lazaret.hc (closed)", tostring(hc))
      hc = nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
    end)

    it("makes the handle and every view of it raise 'closed coordinator'", function()
      local hc, store, r = begun()
      hc:close()
      for _, f in ipairs({
        function() hc:begin() end,
        function() hc:generation() end,
        function() hc:lower_lookup() end,
        function() hc:lease_acquire() end,
        function() hc:lease_release() end,
        function() hc:attest_network() end,
        function() hc:readiness() end,
        function() hc:publish() end,
        function() store:intent("sandbox") end,
        function() store:phase("sandbox") end,
        function() store:record("artifact") end,
        function() store:anchor_unmounted() end,
        function() store:generation("stopping") end,
        function() r:spawn() end,
        function() r:expect("mounts") end,
        function() r:ack("attached_runsc") end,
        function() r:stop() end,
        function() dstore.of(hc) end,
        function() rs.of(hc) end,
      }) do
        assert.error_matches(f, "attempt to use a closed coordinator")
      end
      -- The views still print.
      assert.are.equal("lazaret.dstore", tostring(store))
      assert.are.equal("lazaret.rs", tostring(r))
    end)

    it("releases the Domain and ends its generation, so the next coordinator begins another", function()
      local hc, store = begun()
      assert.is_true(store:intent("host_coordinator"))
      hc:close()
      -- begin refuses (EBUSY) while an earlier generation is live.
      local again, s2 = begun()
      assert.is_true(again:generation() > 0)
      assert.is_false(s2:phase("host_coordinator"))
      again:close()
    end)

    it("is safe under garbage collection after close", function()
      for _ = 1, 3 do
        local hc = begun()
        dstore.of(hc)
        rs.of(hc)
        hc:close()
      end
      collectgarbage()
      collectgarbage()
      open():close()
    end)
  end)

  it("leaks no globals", function()
    local before = globals()
    local hc, store, r = begun()
    hc:generation()
    store:phase("sandbox")
    r:stop()
    tostring(hc)
    hc:close()
    assert.are.same(before, globals())
  end)
end)
