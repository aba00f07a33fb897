-- The Host Coordinator's generation, in the order of the specification:
-- spec 3.3 (participant protocol: intent, spawn, stage, acknowledge,
-- commit after readiness, activate), 3.6 (prepared-lower lease; State
-- Anchor mount and unmount) and 3.7 (network attestation), then
-- publication (3.4) and teardown in reverse.
--
-- Lua orders; C checks (lazaret.core.coordinator, .dstore, .rs): every
-- step refuses when the one it depends on has not happened, so a mistake
-- here stops a launch and never weakens one. Run as `lazaret __hc ...` by
-- the first CLI of a Domain (core/session/client.h).
local M = {}

local io_stderr, string_format, os_date, error, pcall, type, ipairs =
  io.stderr, string.format, os.date, error, pcall, type, ipairs

local errno = require("lazaret.core.errno")
local escape = require("lazaret.core.text").escape
local monotonic_ms = require("lazaret.core.platform").monotonic_ms
local table_concat = table.concat

-- One line per message: what a sandbox names cannot forge another line or
-- reach the reader's terminal. One write: the Runtime Supervisor relays
-- its helpers' lines into the same file meanwhile.
local function log(msg)
  io_stderr:write(table_concat({ os_date("!%Y-%m-%dT%H:%M:%SZ"), " ", escape(msg), "\n" }))
end

-- A step's binding result, or the failure raised as {step, msg, errno}.
local function must(step, ok, msg, code)
  if not ok then error({ step = step, msg = msg, errno = code }, 0) end
  return ok
end

-- Runs f, whose store transitions commit as one transaction; a failure
-- inside f is raised after what succeeded before it committed.
local function batch(store, f)
  must("store batch", store:batch(f))
end

-- The process roles the RS creates, in the order teardown retires them
-- (spec 3.6 unmount step 3: gone with the RS's namespaces).
M.rs_roles = { "network", "connectivity_helper", "sandbox", "attached_runsc", "runtime_supervisor" }

-- Spec 3.3 step 1: durable intent for everything the RS creates, before it
-- exists (3.6 mount step 4: the State Anchor first).
M.intents = { "state_anchor", "runtime_supervisor", "attached_runsc", "sandbox",
              "connectivity_helper", "network" }

-- The launch's last phase: the generation is published when it ends.
M.published = "commit and publish"

-- What each launch phase cost, for hc.log (docs/performance.md): lap(name)
-- ends a phase; summary() is the total in ms and the phases.
function M.stopwatch()
  local start = monotonic_ms()
  local last, laps = start, {}
  local function lap(name)
    local t = monotonic_ms()
    laps[#laps + 1] = name .. " " .. (t - last)
    last = t
  end
  local function summary()
    return monotonic_ms() - start, table_concat(laps, ", ")
  end
  return lap, summary
end

-- h = { hc = coordinator handle, store = dstore view, rs = rs view };
-- lap (optional) is called at the end of each phase.
function M.launch(h, lap)
  local hc, store, rs = h.hc, h.store, h.rs
  lap = lap or function() end
  -- The transitions in one batch commit together: no action lies between
  -- them (spec 3.3; C refuses every action inside a batch).
  batch(store, function()
    -- The HC is a participant of its own generation.
    must("host coordinator intent", store:intent("host_coordinator"))
    must("host coordinator enter", store:enter("host_coordinator"))
    must("host coordinator active", store:activate("host_coordinator"))
    -- Spec 3.6 lease acquisition: 1. intent naming the artifact, 2. the
    -- catalog lease, 3. held. (The lookup only reads the catalog.)
    must("prepared lower", hc:lower_lookup())
    must("prepared lower intent", store:intent("prepared_lower"))
    must("prepared lower artifact", store:record("artifact"))
  end)
  must("catalog lease", hc:lease_acquire())
  batch(store, function()
    must("catalog lease record", store:record("lease"))
    must("prepared lower active", store:activate("prepared_lower"))
    for _, role in ipairs(M.intents) do
      must(role .. " intent", store:intent(role))
    end
  end)
  lap("lease")

  -- The broker stages the RS in the store before it releases it.
  must("runtime supervisor", rs:spawn())
  lap("supervisor")

  -- Spec 3.6 mount steps 5-6: the exact mount identities, then active.
  must("state anchor mounts", rs:expect("mounts"))
  batch(store, function()
    must("state anchor record", store:record("mounts"))
    must("state anchor active", store:activate("state_anchor"))
  end)
  lap("mounts and router")

  -- Spec 3.3 steps 5-7, twice: staged in the store, then acknowledged.
  must("slirp4netns staged", rs:expect("helper-staged"))
  must("slirp4netns stage", store:stage("connectivity_helper"))
  must("slirp4netns release", rs:ack("connectivity_helper"))
  lap("network helper")
  must("runsc staged", rs:expect("staged"))
  must("runsc stage", store:stage("attached_runsc"))
  must("runsc release", rs:ack("attached_runsc"))
  lap("canary and policy")

  -- Spec 3.7 MarkNetworkReady: the HC judges the RS's record.
  must("readiness report", rs:expect("ready"))
  must("network attestation", hc:attest_network())
  lap("sandbox start")

  -- Spec 3.3 step 9: commit only after target readiness.
  batch(store, function()
    must("runtime supervisor commit", store:commit("runtime_supervisor"))
    must("runtime supervisor active", store:activate("runtime_supervisor"))
    must("slirp4netns commit", store:commit("connectivity_helper"))
    must("slirp4netns active", store:activate("connectivity_helper"))
    must("network enter", store:enter("network"))
    must("network readiness record", store:record("readiness"))
    must("network active", store:activate("network"))
    must("runsc commit", store:commit("attached_runsc"))
    must("runsc active", store:activate("attached_runsc"))
    must("sandbox stage", store:stage("sandbox"))
    must("sandbox commit", store:commit("sandbox"))
    must("sandbox active", store:activate("sandbox"))
  end)

  -- Spec 3.4: sessions only for a published generation.
  must("publication", hc:publish())
  lap(M.published)
end

-- Retires role from whatever phase it reached: release intent where the
-- store needs it, then clean (which C refuses without absence proof).
local function retire(store, role)
  local phase, msg, code = store:phase(role)
  if phase == nil then must(role .. " phase", nil, msg, code) end
  if not phase or phase == "clean" then return end
  if phase ~= "intent" and phase ~= "release" then
    must(role .. " release", store:release(role))
  end
  must(role .. " clean", store:clean(role))
end

-- Teardown in reverse (spec 3.6 unmount and lease release), from any point
-- launch reached. The generation ends stopped when everything was retired
-- and it was healthy (and its RS reported no loss), else failed. Returns
-- whether everything was retired (each failure logged; a failure stops
-- only the steps that depend on it) and whether the generation was healthy.
function M.teardown(h, healthy, lap)
  local hc, store, rs = h.hc, h.store, h.rs
  lap = lap or function() end
  local ok = true
  local function try(step, f)
    local done, e = pcall(f)
    if not done then
      ok = false
      log(string_format("teardown: %s failed: %s", step, type(e) == "table" and e.msg or e))
    end
    return done
  end
  -- Transitions with no action between them commit together (spec 3.3).
  -- A batch the store refuses, or whose commit fails (nothing of it
  -- committed), is run again one transition at a time.
  local function together(f)
    local done, msg = store:batch(f)
    if not done then
      log("teardown: store batch failed (" .. msg .. "); one transition at a time")
      f()
    end
  end
  local mounted
  together(function()
    try("generation stopping", function() must("stopping", store:generation("stopping")) end)
    -- 1. State Anchor release intent, keeping the exact mount identities.
    mounted = store:phase("state_anchor") == "active"
    if mounted then try("state anchor release", function() must("release", store:release("state_anchor")) end) end
  end)
  lap("stopping")
  -- 2. The RS unmounts exactly and proves absence (or its namespaces end).
  local stopped = try("runtime supervisor stop", function() must("stop", rs:stop()) end)
  lap("supervisor stop")
  -- A loss the RS reported (sandbox, router, network helper) fails the
  -- generation even when its sessions had ended first.
  local lost = rs:failure()
  if lost then
    log("the Runtime Supervisor failed: " .. lost)
    healthy = false
  end
  if not stopped then
    -- Without absence proof nothing below may be cleaned.
    try("generation failed", function() must("failed", store:generation("failed")) end)
    return false, healthy
  end
  together(function()
    for _, role in ipairs(M.rs_roles) do
      try(role, function() retire(store, role) end)
    end
    -- 3. Anchor clean and prepared-lower release intent, atomically.
    local lower = store:phase("prepared_lower")
    if mounted then
      try("state anchor unmounted", function() must("unmounted", store:anchor_unmounted()) end)
    else
      try("state anchor", function() retire(store, "state_anchor") end)
      if lower == "acquiring" or lower == "active" then
        try("prepared lower release", function() must("release", store:release("prepared_lower")) end)
      end
    end
  end)
  lap("retire")
  -- 4. The exact lease, then the prepared lower clean.
  local released = try("catalog lease release", function() must("lease", hc:lease_release()) end)
  lap("lease")
  together(function()
    if released then
      try("prepared lower", function() retire(store, "prepared_lower") end)
    end
    try("host coordinator", function() retire(store, "host_coordinator") end)
    local final = (ok and healthy) and "stopped" or "failed"
    -- "stopped" needs every session record clean: one whose end the store
    -- could not take (a full disk; the coordinator logged it) leaves the
    -- generation failed instead, its records kept for the next launch's
    -- recovery, never "stopping" for ever.
    if not try("generation " .. final, function() must(final, store:generation(final)) end) and
        final == "stopped" then
      try("generation failed", function() must("failed", store:generation("failed")) end)
    end
  end)
  lap("ended")
  return ok, healthy
end

-- One CLI waits on our standard output for "ready" or the reason we failed.
local function report_failure(coordinator, msg, code)
  coordinator.notify(string_format("error %d %s\n", code or errno.EIO, msg))
end

-- lap, and then the launch stops if a stop signal came (SIGTERM, SIGINT,
-- SIGHUP): the teardown takes back what the phases built. Not after
-- publication: session.serve ends by itself on one, the socket withdrawn
-- first.
function M.lap_unless_stopped(coordinator, lap)
  return function(name)
    lap(name)
    local sig = name ~= M.published and coordinator.stop_requested()
    if sig then
      error({ step = name, stopped = true,
              msg = "the Domain's Host Coordinator was told to stop (" .. sig .. ") while starting the sandbox",
              errno = errno.EINTR }, 0)
    end
  end
end

-- h: the views of one open coordinator handle.
function M.views(hc)
  return {
    hc = hc,
    store = require("lazaret.core.dstore").of(hc),
    rs = require("lazaret.core.rs").of(hc),
  }
end

-- Reclaims the unleased prepared images beyond the keep most recently
-- prepared, sparing the one this launch used (OR-7; `image gc` is the
-- manual form). A failure is logged, never fatal: the generation has ended.
function M.auto_gc(cfg, keep, spare)
  local items, msg = require("lazaret.core.image").gc(cfg, { keep = keep, spare = spare })
  if not items then
    log("automatic image gc failed: " .. msg)
    return
  end
  for _, it in ipairs(items) do
    if it.action == "removed" or it.action == "removed-abandoned" then
      log(string_format("automatic image gc (storage.keep_unused_images = %d): %s %s %s", keep, it.action,
                        it.where, it.name))
    end
  end
end

function M.main(cmd)
  local coordinator = require("lazaret.core.coordinator")
  local config = require("lazaret.core.config")
  local session = require("lazaret.core.session")
  local lap, summary = M.stopwatch()
  local detached, dmsg, dcode = coordinator.detach()
  if not detached then
    report_failure(coordinator, dmsg, dcode)
    return 1
  end
  local cfg <close>, msg, code = config.load({
    config = cmd.config, profile = cmd.profile, workspace = cmd.workspace,
  })
  if not cfg then
    report_failure(coordinator, msg, code)
    return 78
  end
  lap("configuration")
  -- Spec 3.2: a consumer resolving independently must match exactly.
  local s = cfg:summary()
  if s.domain_id ~= cmd.expect_domain or s.fingerprint ~= cmd.expect_fingerprint then
    report_failure(coordinator, "the configuration changed while the Domain was starting; try again",
                   errno.ESTALE)
    return 78
  end

  local hc <close>, hmsg, herr = coordinator.open(cfg)
  if not hc then
    if herr == errno.EBUSY then -- another coordinator holds the Domain
      -- Not logged: a waiting CLI asks again and again (bounded by its
      -- timeout), and each ask would add a line.
      coordinator.notify("busy\n")
      return 0
    end
    report_failure(coordinator, hmsg, herr)
    return 1
  end
  lap("store")
  local recovered, rmsg, rerr = require("lazaret.runtime.recovery").run(hc, log)
  if not recovered then
    log("bootstrap recovery refused the launch: " .. rmsg)
    hc:close()
    report_failure(coordinator, rmsg .. "; nothing was started", rerr)
    return 1
  end
  lap("recovery")
  local began, bmsg, berr = hc:begin()
  if not began then
    hc:close()
    report_failure(coordinator, bmsg, berr)
    return 1
  end
  local h = M.views(hc)
  log("generation " .. hc:generation() .. " starting")

  lap("generation begun")
  local launched, e = pcall(M.launch, h, M.lap_unless_stopped(coordinator, lap))
  if not launched then
    if type(e) ~= "table" then e = { step = "launch", msg = e, errno = errno.EIO } end
    log(e.stopped and ("launch stopped after " .. e.step .. ": " .. e.msg) or (e.step .. " failed: " .. e.msg))
    -- The CLI returns on our report: leave nothing behind before it.
    M.teardown(h, false)
    hc:close()
    report_failure(coordinator, e.msg, e.errno)
    return 1
  end
  coordinator.notify("ready\n")
  local total, laps = summary()
  log(string_format("generation %d published in %d ms (%s)", hc:generation(), total, laps))
  -- Inside "supervisor" to "sandbox start": the RS's own steps.
  local steps = h.rs:steps()
  if steps then log(string_format("generation %d supervisor steps (ms): %s", hc:generation(), steps)) end
  -- Page faults cost about 10 us each on the machines measured (issue 15).
  local faults, cpu = coordinator.usage()
  log(string_format("generation %d coordinator at publication: page faults %d, CPU %.1f",
                    hc:generation(), faults, cpu))

  local served, smsg = session.serve(hc, require("lazaret.runtime.escalation").route)
  if not served then log("serve ended: " .. smsg) end
  local tlap, tsummary = M.stopwatch()
  local clean, healthy = M.teardown(h, served, tlap)
  clean = clean and healthy
  local total, laps = tsummary()
  log(string_format("generation ended %s (teardown %d ms: %s)", clean and "cleanly" or "with errors",
                    total, laps))
  -- OR-7: the automatic policy, after the Domain is let go (a new launch
  -- need not wait for it).
  local artifact = hc:artifact()
  hc:close()
  if s.keep_unused_images > 0 then M.auto_gc(cfg, s.keep_unused_images, artifact) end
  return clean and 0 or 1
end

return M
