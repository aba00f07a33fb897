-- busted spec for lua/lazaret/runtime/supervisor.lua: the Runtime
-- Supervisor's steps (spec 3.3, 3.6, 3.7; core/runtime/supervisor.h) with a
-- fake handle. The real handle exists only inside an RS
-- (bindings/runtime/l_supervisor.c); tests/e2e runs it.
require("lazaret_spec")
local sup = require("lazaret.runtime.supervisor")

-- The RS's order: mounts first (MOUNTS), the workspace router started, the
-- egress proxy (in the host's netns), slirp4netns, the canary, the proxy's
-- link, the policy, the router's mount attached once it serves, runsc and
-- its container, the init's report, the network finished, READY.
local STEPS = {
  "mount", "start_router", "start_egress", "start_helper", "prove_canary", "attach_egress", "install_policy",
  "attach_router", "start_runsc", "await_running", "read_init_report", "finish_network", "report_ready",
}

-- A fake lazaret.core.supervisor handle: every call is logged by name
-- ("abort(why)" with its reason); a step listed in fail returns nil, msg,
-- errno; serve returns opts.serve_end unless it fails.
local function fake(opts)
  opts = opts or {}
  local log = {}
  local rs = {}
  local function check(self, name)
    assert(self == rs, name .. " called without the handle as self")
  end
  for _, name in ipairs(STEPS) do
    rs[name] = function(self)
      check(self, name)
      log[#log + 1] = name
      if opts.raise == name then error("raised in " .. name) end
      if opts.fail == name then return nil, "no " .. name, 5 end
      return true
    end
  end
  rs.serve = function(self)
    check(self, "serve")
    log[#log + 1] = "serve"
    if opts.fail == "serve" then return nil, "the control channel broke", 32 end
    return opts.serve_end or "stop", opts.serve_reason or ""
  end
  rs.stop = function(self)
    check(self, "stop")
    log[#log + 1] = "stop"
    if opts.fail == "stop" then return nil, "mounts remain", 16 end
    return true
  end
  rs.abort = function(self, why)
    check(self, "abort")
    assert.are.equal("string", type(why))
    log[#log + 1] = "abort(" .. why .. ")"
  end
  rs.reached = function(self)
    check(self, "reached")
    return "none"
  end
  return rs, log
end

local function concat(...)
  local t = {}
  for _, list in ipairs({ ... }) do
    for _, v in ipairs(list) do
      t[#t + 1] = v
    end
  end
  return t
end

describe("lazaret.runtime.supervisor", function()
  it("lists the steps in the RS's order", function()
    assert.are.same(STEPS, sup.steps)
  end)

  it("runs every step, serves, stops and returns 0", function()
    local rs, log = fake()
    assert.are.equal(0, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "stop" }), log)
  end)

  it("stops after STOP and after the loss of the HC", function()
    for _, ending in ipairs({ "stop", "hc-lost" }) do
      local rs, log = fake({ serve_end = ending })
      assert.are.equal(0, sup.main(rs), ending)
      assert.are.same(concat(STEPS, { "serve", "stop" }), log, ending)
    end
  end)

  it("aborts at a failing step with its name and reason, runs no later step, returns 1", function()
    for k, step in ipairs(STEPS) do
      local rs, log = fake({ fail = step })
      assert.are.equal(1, sup.main(rs), step)
      local want = table.move(STEPS, 1, k, 1, {})
      want[#want + 1] = "abort(" .. step .. ": no " .. step .. ")"
      assert.are.same(want, log, step)
    end
  end)

  it("aborts when a step raises, with the error as the reason", function()
    local rs, log = fake({ raise = "install_policy" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same({ "mount", "start_router", "start_egress", "start_helper", "prove_canary", "attach_egress",
      "install_policy" }, table.move(log, 1, 7, 1, {}))
    assert.are.equal(8, #log)
    assert.matches("^abort%(.*raised in install_policy%)$", log[8])
  end)

  it("aborts when the workspace router ends (spec 3.5 router loss), without stop", function()
    local rs, log = fake({ serve_end = "router-ended" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "abort(the workspace router ended)" }), log)
  end)

  it("aborts when the sandbox ends on its own, without stop", function()
    local rs, log = fake({ serve_end = "runsc-ended" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve",
      "abort(the sandbox ended on its own (its runsc run client exited); runsc's log is in hc.log)" }), log)
  end)

  it("aborts when the network helper ends (spec 3.7), without stop", function()
    local rs, log = fake({ serve_end = "network-helper-ended" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "abort(the network helper (slirp4netns) ended)" }), log)
  end)

  it("aborts with the RS's reason when the sandbox's memory passed its limit, without stop", function()
    local why = "the sandbox's memory passed its limit (300 MiB in use, the limit is 256 MiB); it was stopped"
    local rs, log = fake({ serve_end = "memory-exceeded", serve_reason = why })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "abort(" .. why .. ")" }), log)
  end)

  it("aborts when the egress proxy ends, without stop", function()
    local rs, log = fake({ serve_end = "egress-proxy-ended" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "abort(the egress proxy ended)" }), log)
  end)

  it("aborts when serving fails and does not stop", function()
    local rs, log = fake({ fail = "serve" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "abort(serve: the control channel broke)" }), log)
  end)

  it("returns 1 when stop fails, without an abort (stop reports FAILED itself)", function()
    local rs, log = fake({ fail = "stop" })
    assert.are.equal(1, sup.main(rs))
    assert.are.same(concat(STEPS, { "serve", "stop" }), log)
  end)

  it("the binding makes no handle: lazaret.core.supervisor exports nothing", function()
    local m = require("lazaret.core.supervisor")
    assert.are.same({}, m)
  end)
end)
