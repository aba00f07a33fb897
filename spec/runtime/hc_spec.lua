-- busted spec for lua/lazaret/runtime/hc.lua: the order in which the Host
-- Coordinator's generation is launched and torn down (spec 3.3, 3.6, 3.7;
-- docs/architecture.md "Domain Store and lease order"), with fakes for the
-- coordinator handle and its store and RS views. The C side refuses every
-- step out of order (spec/runtime/coordinator_binding_spec.lua); the real
-- sequence against a sandbox runs in tests/e2e.
require("lazaret_spec") -- hc.lua requires lazaret.core.errno

-- hc.lua with io.stderr replaced while it loads: it keeps the stream it
-- found, so its teardown log lands in `logged`.
local logged = {}
local hcm
do
  local stderr = io.stderr
  io.stderr = {
    write = function(self, ...)
      logged[#logged + 1] = table.concat({ ... })
      return self
    end,
  }
  package.loaded["lazaret.runtime.hc"] = nil
  local ok, m = pcall(require, "lazaret.runtime.hc")
  io.stderr = stderr
  assert(ok, m)
  hcm = m
end

-- Fakes: every method call, whatever its name, appends "obj:method(arg)"
-- to the shared log and returns true; the call numbered fail_at (or the
-- first call matching fail_on) returns nil, "fail <call>", 1000 + number
-- instead. store:phase(role) answers from `phases` (false: no row) and is
-- not logged; the store's transitions move `phases` as the Domain Store
-- would.
local function fakes(opts)
  opts = opts or {}
  local log, n = {}, 0
  local phases = opts.phases or {}
  local function call(obj, name, arg)
    local entry = obj .. ":" .. name .. "(" .. (arg ~= nil and tostring(arg) or "") .. ")"
    n = n + 1
    log[#log + 1] = entry
    if n == opts.fail_at or entry == opts.fail_on then
      return nil, "fail " .. entry, 1000 + n
    end
    if obj == "store" then
      if name == "intent" then
        phases[arg] = "intent"
      elseif name == "activate" then
        phases[arg] = "active"
      elseif name == "release" then
        phases[arg] = "release"
      elseif name == "clean" then
        phases[arg] = "clean"
      elseif name == "anchor_unmounted" then
        phases.state_anchor = "clean"
        phases.prepared_lower = "release"
      end
    end
    return true
  end
  local function fake(obj, extra)
    return setmetatable(extra or {}, {
      __index = function(_, name)
        return function(self, arg)
          assert(type(self) == "table", obj .. "." .. name .. " called without self")
          return call(obj, name, arg)
        end
      end,
    })
  end
  -- store:batch(f) runs f as the C binding does; `batches` lists the
  -- calls of each batch. An action of hc or rs inside one fails the spec
  -- (C refuses them: coordinator.c no_batch). opts.batch_fails: the store
  -- refuses every batch without running f.
  local batches, in_batch = {}, false
  local actions_in_batch = { lower_lookup = true, attest_network = true }
  local plain = call
  call = function(obj, name, arg)
    if in_batch then
      assert(obj == "store" or actions_in_batch[name], obj .. ":" .. name .. " inside a store batch")
      local b = batches[#batches]
      b[#b + 1] = obj .. ":" .. name .. "(" .. (arg ~= nil and tostring(arg) or "") .. ")"
    end
    return plain(obj, name, arg)
  end
  local store = fake("store", {
    batch = function(self, f)
      assert(type(self) == "table" and type(f) == "function" and not in_batch)
      if opts.batch_fails then return nil, "batch refused", 16 end
      in_batch = true
      batches[#batches + 1] = {}
      local ok, e = pcall(f)
      in_batch = false
      if not ok then error(e, 0) end
      return true
    end,
    phase = function(self, role)
      assert(type(self) == "table" and type(role) == "string")
      if opts.phase_fails and opts.phase_fails[role] then
        return nil, "phase " .. role .. " failed", 5
      end
      return phases[role] or false
    end,
  })
  -- rs:failure() answers opts.rs_failure (the reason the RS reported)
  -- and, like store:phase, is not logged.
  local rs = fake("rs", {
    failure = function(self)
      assert(type(self) == "table")
      return opts.rs_failure
    end,
  })
  return { hc = fake("hc"), store = store, rs = rs }, log, phases, batches
end

local function prefix(list, k)
  return table.move(list, 1, k, 1, {})
end

-- Spec 3.3/3.6/3.7 and architecture.md "The order the code follows",
-- steps 2-4 (step 1, open and begin, is hc.main's).
local LAUNCH = {
  -- the HC is a participant of its own generation
  "store:intent(host_coordinator)",
  "store:enter(host_coordinator)",
  "store:activate(host_coordinator)",
  -- spec 3.6 lease acquisition 1-3
  "hc:lower_lookup()",
  "store:intent(prepared_lower)",
  "store:record(artifact)",
  "hc:lease_acquire()",
  "store:record(lease)",
  "store:activate(prepared_lower)",
  -- spec 3.3 step 1: intent for everything the RS creates
  "store:intent(state_anchor)",
  "store:intent(runtime_supervisor)",
  "store:intent(attached_runsc)",
  "store:intent(sandbox)",
  "store:intent(connectivity_helper)",
  "store:intent(network)",
  "rs:spawn()",
  -- spec 3.6 mount steps 5-6
  "rs:expect(mounts)",
  "store:record(mounts)",
  "store:activate(state_anchor)",
  -- spec 3.3 steps 5-7, slirp4netns then runsc
  "rs:expect(helper-staged)",
  "store:stage(connectivity_helper)",
  "rs:ack(connectivity_helper)",
  "rs:expect(staged)",
  "store:stage(attached_runsc)",
  "rs:ack(attached_runsc)",
  -- spec 3.7 MarkNetworkReady
  "rs:expect(ready)",
  "hc:attest_network()",
  -- spec 3.3 step 9: commit after readiness
  "store:commit(runtime_supervisor)",
  "store:activate(runtime_supervisor)",
  "store:commit(connectivity_helper)",
  "store:activate(connectivity_helper)",
  "store:enter(network)",
  "store:record(readiness)",
  "store:activate(network)",
  "store:commit(attached_runsc)",
  "store:activate(attached_runsc)",
  "store:stage(sandbox)",
  "store:commit(sandbox)",
  "store:activate(sandbox)",
  -- spec 3.4
  "hc:publish()",
}

local ALL_ACTIVE = {
  "prepared_lower", "state_anchor", "sandbox", "runtime_supervisor", "attached_runsc",
  "host_coordinator", "connectivity_helper", "network",
}

local function phases_all(phase)
  local t = {}
  for _, role in ipairs(ALL_ACTIVE) do
    t[role] = phase
  end
  return t
end

-- A published generation's teardown (architecture.md steps 5-7).
local TEARDOWN_PUBLISHED = {
  "store:generation(stopping)",
  "store:release(state_anchor)",
  "rs:stop()",
  "store:release(network)",
  "store:clean(network)",
  "store:release(connectivity_helper)",
  "store:clean(connectivity_helper)",
  "store:release(sandbox)",
  "store:clean(sandbox)",
  "store:release(attached_runsc)",
  "store:clean(attached_runsc)",
  "store:release(runtime_supervisor)",
  "store:clean(runtime_supervisor)",
  "store:anchor_unmounted()",
  "hc:lease_release()",
  "store:clean(prepared_lower)",
  "store:release(host_coordinator)",
  "store:clean(host_coordinator)",
  "store:generation(stopped)",
}

local function with_last(list, last)
  local t = prefix(list, #list - 1)
  t[#t + 1] = last
  return t
end

local function contains(list, pattern)
  for _, v in ipairs(list) do
    if v:find(pattern) then return true end
  end
  return false
end

describe("lazaret.runtime.hc", function()
  before_each(function()
    for i = #logged, 1, -1 do
      logged[i] = nil
    end
  end)

  describe("launch", function()
    it("runs the steps in the specification's order and nothing else", function()
      local h, log = fakes()
      hcm.launch(h)
      assert.are.same(LAUNCH, log)
      assert.are.same({}, logged)
    end)

    it("commits transitions with no action between them together, and no action inside a batch", function()
      local h, log, _, batches = fakes()
      hcm.launch(h)
      assert.are.same(LAUNCH, log)
      local function slice(i, j) return table.move(LAUNCH, i, j, 1, {}) end
      assert.are.same({ slice(1, 6), slice(8, 15), slice(18, 19), slice(28, 39) }, batches)
    end)

    it("stops at a batch the store refuses", function()
      local h, log = fakes({ batch_fails = true })
      local ok, e = pcall(hcm.launch, h)
      assert.is_false(ok)
      assert.are.equal("store batch", e.step)
      assert.are.equal("batch refused", e.msg)
      assert.are.same({}, log)
    end)

    it("stops after the phase under way once a stop signal came, and not before", function()
      local h, log = fakes()
      local stop, laps = nil, {}
      local coordinator = { stop_requested = function() return stop end }
      local lap = hcm.lap_unless_stopped(coordinator, function(name)
        laps[#laps + 1] = name
        if name == "supervisor" then stop = "SIGTERM" end
      end)
      local ok, e = pcall(hcm.launch, h, lap)
      assert.is_false(ok)
      assert.are.same({ "lease", "supervisor" }, laps)
      assert.are.equal("supervisor", e.step)
      assert.are.equal("the Domain's Host Coordinator was told to stop (SIGTERM) while starting the sandbox", e.msg)
      assert.are.equal(require("lazaret.core.errno").EINTR, e.errno)
      assert.are.equal("rs:spawn()", log[#log], "a step ran after the stop")
      assert.is_true(e.stopped)
    end)

    it("leaves a stop after publication to serving", function()
      local h = fakes()
      local laps = {}
      local coordinator = { stop_requested = function() return "SIGTERM" end }
      local lap = hcm.lap_unless_stopped(coordinator, function(name) laps[#laps + 1] = name end)
      local ok = pcall(hcm.launch, h, function(name)
        if name == hcm.published then lap(name) else laps[#laps + 1] = name end
      end)
      assert.is_true(ok, "a stop after publication failed the launch")
      assert.are.equal(hcm.published, laps[#laps])
    end)

    it("publishes last and only once", function()
      local h, log = fakes()
      hcm.launch(h)
      assert.are.equal("hc:publish()", log[#log])
      local n = 0
      for _, e in ipairs(log) do
        if e == "hc:publish()" then n = n + 1 end
      end
      assert.are.equal(1, n)
    end)

    it("raises {step, msg, errno} at a failing step and runs no later one, for every step", function()
      local steps = {}
      for k = 1, #LAUNCH do
        local h, log = fakes({ fail_at = k })
        local ok, e = pcall(hcm.launch, h)
        assert.is_false(ok, "step " .. k .. " (" .. LAUNCH[k] .. ") failed but launch went on")
        assert.are.equal("table", type(e), "step " .. k .. " raised " .. tostring(e))
        assert.are.equal("fail " .. LAUNCH[k], e.msg, "step " .. k)
        assert.are.equal(1000 + k, e.errno, "step " .. k)
        assert.are.equal("string", type(e.step), "step " .. k)
        assert.is_true(#e.step > 0, "step " .. k)
        assert.are.same(prefix(LAUNCH, k), log, "step " .. k)
        assert.is_nil(steps[e.step], "step name '" .. e.step .. "' names steps " .. tostring(steps[e.step])
          .. " and " .. k)
        steps[e.step] = k
      end
    end)

    it("names the failing step after what it does", function()
      local cases = {
        ["hc:lower_lookup()"] = "prepared lower",
        ["hc:lease_acquire()"] = "lease",
        ["rs:spawn()"] = "runtime supervisor",
        ["rs:expect(ready)"] = "readiness",
        ["hc:attest_network()"] = "network",
        ["hc:publish()"] = "publication",
        ["store:intent(sandbox)"] = "sandbox",
      }
      for call, words in pairs(cases) do
        local h = fakes({ fail_on = call })
        local ok, e = pcall(hcm.launch, h)
        assert.is_false(ok)
        assert.matches(words, e.step, 1, true)
      end
    end)
  end)

  describe("teardown", function()
    it("retires a published generation in reverse and ends it stopped", function()
      local h, log, phases = fakes({ phases = phases_all("active") })
      assert.is_true(hcm.teardown(h, true))
      assert.are.same(TEARDOWN_PUBLISHED, log)
      assert.are.same(phases_all("clean"), phases)
      assert.are.same({}, logged)
    end)

    it("commits its transitions in three batches around the actions", function()
      local h, log, _, batches = fakes({ phases = phases_all("active") })
      assert.is_true(hcm.teardown(h, true))
      assert.are.same(TEARDOWN_PUBLISHED, log)
      local function slice(i, j) return table.move(TEARDOWN_PUBLISHED, i, j, 1, {}) end
      assert.are.same({ slice(1, 2), slice(4, 14), slice(16, 19) }, batches)
    end)

    it("runs the transitions one at a time when the store refuses batches", function()
      local h, log, phases = fakes({ phases = phases_all("active"), batch_fails = true })
      assert.is_true(hcm.teardown(h, true))
      assert.are.same(TEARDOWN_PUBLISHED, log)
      assert.are.same(phases_all("clean"), phases)
      assert.is_true(contains(logged, "store batch failed %(batch refused%)"))
    end)

    it("records the generation failed when the store refuses it stopped", function()
      local h, log = fakes({ phases = phases_all("active"), fail_on = "store:generation(stopped)" })
      assert.is_false(hcm.teardown(h, true))
      assert.are.same("store:generation(stopped)", log[#log - 1])
      assert.are.same("store:generation(failed)", log[#log])
      assert.is_true(contains(logged, "teardown: generation stopped failed: fail store:generation%(stopped%)"))
    end)

    it("ends an unhealthy generation failed after retiring everything", function()
      local h, log = fakes({ phases = phases_all("active") })
      assert.is_true(hcm.teardown(h, false))
      assert.are.same(with_last(TEARDOWN_PUBLISHED, "store:generation(failed)"), log)
      h, log = fakes({ phases = phases_all("active") })
      assert.is_true(hcm.teardown(h, nil))
      assert.are.equal("store:generation(failed)", log[#log])
    end)

    it("ends a generation failed, saying why, when its RS reported a loss", function()
      local h, log, phases = fakes({ phases = phases_all("active"), rs_failure = "the sandbox ended" })
      local retired, healthy = hcm.teardown(h, true)
      assert.is_true(retired)
      assert.is_false(healthy)
      assert.are.same(with_last(TEARDOWN_PUBLISHED, "store:generation(failed)"), log)
      assert.are.same(phases_all("clean"), phases)
      assert.is_true(contains(logged, "the Runtime Supervisor failed: the sandbox ended"))
      local _, ok = hcm.teardown(fakes({ phases = phases_all("active") }), true)
      assert.is_true(ok)
    end)

    it("cleans nothing without the RS's absence proof and records the generation failed", function()
      local h, log, phases = fakes({ phases = phases_all("active"), fail_on = "rs:stop()" })
      assert.is_false(hcm.teardown(h, true))
      assert.are.same({
        "store:generation(stopping)",
        "store:release(state_anchor)",
        "rs:stop()",
        "store:generation(failed)",
      }, log)
      for role, phase in pairs(phases) do
        assert.are_not.equal("clean", phase, role)
      end
      assert.is_true(contains(logged, "runtime supervisor stop failed: fail rs:stop%(%)"))
    end)

    it("cleans roles in intent without a release and skips roles without a row", function()
      -- Launch failed after the intents, before the RS started.
      local phases = phases_all("intent")
      phases.host_coordinator = "active"
      phases.prepared_lower = "active"
      local h, log = fakes({ phases = phases })
      assert.is_true(hcm.teardown(h, false))
      assert.are.same({
        "store:generation(stopping)",
        "rs:stop()",
        "store:clean(network)",
        "store:clean(connectivity_helper)",
        "store:clean(sandbox)",
        "store:clean(attached_runsc)",
        "store:clean(runtime_supervisor)",
        "store:clean(state_anchor)",
        "store:release(prepared_lower)",
        "hc:lease_release()",
        "store:clean(prepared_lower)",
        "store:release(host_coordinator)",
        "store:clean(host_coordinator)",
        "store:generation(failed)",
      }, log)
    end)

    it("retires only the participants that have a row", function()
      -- Launch failed at the prepared lower's lookup.
      local h, log = fakes({ phases = { host_coordinator = "active" } })
      assert.is_true(hcm.teardown(h, false))
      assert.are.same({
        "store:generation(stopping)",
        "rs:stop()",
        "hc:lease_release()",
        "store:release(host_coordinator)",
        "store:clean(host_coordinator)",
        "store:generation(failed)",
      }, log)
      -- Nothing at all: the generation still ends.
      h, log = fakes({ phases = {} })
      assert.is_true(hcm.teardown(h, false))
      assert.are.same({
        "store:generation(stopping)",
        "rs:stop()",
        "hc:lease_release()",
        "store:generation(failed)",
      }, log)
    end)

    it("cleans a bare prepared-lower intent without a release", function()
      -- Launch failed at the lease: intent and artifact only.
      local h, log = fakes({ phases = { host_coordinator = "active", prepared_lower = "intent" } })
      assert.is_true(hcm.teardown(h, false))
      assert.are.same({
        "store:generation(stopping)",
        "rs:stop()",
        "hc:lease_release()",
        "store:clean(prepared_lower)",
        "store:release(host_coordinator)",
        "store:clean(host_coordinator)",
        "store:generation(failed)",
      }, log)
    end)

    it("releases a State Anchor that recorded mounts but never became active", function()
      local phases = phases_all("intent")
      phases.host_coordinator = "active"
      phases.prepared_lower = "active"
      phases.state_anchor = "acquiring"
      local h, log = fakes({ phases = phases })
      assert.is_true(hcm.teardown(h, false))
      assert.are.same({
        "store:generation(stopping)",
        "rs:stop()",
        "store:clean(network)",
        "store:clean(connectivity_helper)",
        "store:clean(sandbox)",
        "store:clean(attached_runsc)",
        "store:clean(runtime_supervisor)",
        "store:release(state_anchor)",
        "store:clean(state_anchor)",
        "store:release(prepared_lower)",
        "hc:lease_release()",
        "store:clean(prepared_lower)",
        "store:release(host_coordinator)",
        "store:clean(host_coordinator)",
        "store:generation(failed)",
      }, log)
    end)

    it("cleans roles already in release and leaves clean roles alone", function()
      local phases = phases_all("active")
      phases.network = "release"
      phases.sandbox = "clean"
      local h, log = fakes({ phases = phases })
      assert.is_true(hcm.teardown(h, true))
      local want = {}
      for _, e in ipairs(TEARDOWN_PUBLISHED) do
        if e ~= "store:release(network)" and not e:find("%(sandbox%)") then want[#want + 1] = e end
      end
      assert.are.same(want, log)
    end)

    it("keeps the prepared lower when the lease release fails, retires the rest, ends failed", function()
      local h, log, phases = fakes({ phases = phases_all("active"), fail_on = "hc:lease_release()" })
      assert.is_false(hcm.teardown(h, true))
      assert.are.same({
        "store:generation(stopping)",
        "store:release(state_anchor)",
        "rs:stop()",
        "store:release(network)",
        "store:clean(network)",
        "store:release(connectivity_helper)",
        "store:clean(connectivity_helper)",
        "store:release(sandbox)",
        "store:clean(sandbox)",
        "store:release(attached_runsc)",
        "store:clean(attached_runsc)",
        "store:release(runtime_supervisor)",
        "store:clean(runtime_supervisor)",
        "store:anchor_unmounted()",
        "hc:lease_release()",
        "store:release(host_coordinator)",
        "store:clean(host_coordinator)",
        "store:generation(failed)",
      }, log)
      assert.are.equal("release", phases.prepared_lower)
      assert.is_true(contains(logged, "catalog lease release failed"))
    end)

    it("goes on past a failed role, reports it and ends the generation failed", function()
      local h, log, phases = fakes({ phases = phases_all("active"), fail_on = "store:clean(sandbox)" })
      assert.is_false(hcm.teardown(h, true))
      assert.are.same(with_last(TEARDOWN_PUBLISHED, "store:generation(failed)"), log)
      assert.are.equal("release", phases.sandbox)
      assert.is_true(contains(logged, "teardown: sandbox failed: fail store:clean%(sandbox%)"))
    end)

    it("does not clean a role whose release failed", function()
      local h, log = fakes({ phases = phases_all("active"), fail_on = "store:release(attached_runsc)" })
      assert.is_false(hcm.teardown(h, true))
      assert.is_false(contains(log, "store:clean%(attached_runsc%)"))
      assert.are.equal("store:generation(failed)", log[#log])
    end)

    it("skips and reports a role whose phase cannot be read", function()
      local h, log = fakes({ phases = phases_all("active"), phase_fails = { connectivity_helper = true } })
      assert.is_false(hcm.teardown(h, true))
      assert.is_false(contains(log, "connectivity_helper"))
      assert.are.equal("store:generation(failed)", log[#log])
      assert.is_true(contains(logged, "phase connectivity_helper failed"))
    end)

    it("still stops and ends the generation when 'stopping' is refused", function()
      local h, log = fakes({ phases = phases_all("active"), fail_on = "store:generation(stopping)" })
      assert.is_false(hcm.teardown(h, true))
      assert.are.same(with_last(TEARDOWN_PUBLISHED, "store:generation(failed)"), log)
    end)

    it("for every failing step, still records how the generation ended", function()
      for k = 1, #TEARDOWN_PUBLISHED - 1 do
        local h, log = fakes({ phases = phases_all("active"), fail_at = k })
        assert.is_false(hcm.teardown(h, true), "step " .. k)
        assert.are.equal("store:generation(failed)", log[#log], "step " .. k .. " (" .. TEARDOWN_PUBLISHED[k] .. ")")
        assert.are.same(prefix(TEARDOWN_PUBLISHED, k), prefix(log, k), "step " .. k)
      end
    end)
  end)
end)
