-- busted spec for lua/lazaret/state/report.lua: what `lazaret state list`
-- and `state reset` print (spec 3.9, DX-6). The real listing and reset of
-- sandboxes' state run in tests/e2e/test_state.sh.
require("lazaret_spec") -- the escaper is C

local report = require("lazaret.state.report")

local function domain(over)
  local d = {
    id = string.rep("ab", 32), profile = "dev", workspace = "/home/me/project", active = false,
    workspace_gone = false, last_use = 1764693060, leases = 1,
    anchors = {
      { path = "/etc", bytes = 24576, files = 3, incomplete = false },
      { path = "/usr", bytes = 117864243, files = 4210, incomplete = false },
    },
    ignored = { bytes = 2202009, files = 17, incomplete = false },
  }
  for k, v in pairs(over or {}) do d[k] = v end
  return d
end

describe("state report", function()
  it("lists each Domain with its identity, use, leases and sizes", function()
    local t = report.list_text({ domain() })
    assert.matches("Domain " .. string.rep("ab", 32) .. "\n", t, 1, true)
    assert.matches("  profile    dev\n", t, 1, true)
    assert.matches("  workspace  /home/me/project\n", t, 1, true)
    assert.matches("  last used  2025-12-02 16:31 UTC\n", t, 1, true)
    assert.matches("  leases     1\n", t, 1, true)
    assert.matches("  anchor     /etc                 24.0 KiB, 3 files\n", t, 1, true)
    assert.matches("  anchor     /usr                 112.4 MiB, 4210 files\n", t, 1, true)
    assert.matches("  ignored    (workspace)          2.1 MiB, 17 files\n", t, 1, true)
    assert.is_nil(t:find("in use", 1, true))
  end)

  it("marks use, a gone workspace, unknown and incomplete sizes", function()
    local t = report.list_text({ domain({
      active = true, workspace_gone = true, last_use = 0,
      anchors = { { path = "/usr" }, { path = "/var", bytes = 1, files = 1, incomplete = true } },
      ignored = false,
    }) })
    assert.matches("  (in use)\n", t, 1, true)
    assert.matches("/home/me/project  (gone)\n", t, 1, true)
    assert.matches("  last used  unknown\n", t, 1, true)
    assert.matches("/usr                 size unknown\n", t, 1, true)
    assert.matches("1 B, 1 file (at least: not all could be read)\n", t, 1, true)
    assert.is_nil(t:find("ignored", 1, true))
  end)

  it("shows a foreign Domain's problem and no identity", function()
    local t = report.list_text({ domain({ profile = false, workspace = false, anchors = {},
      problem = "the Domain's identity file names another Domain" }) })
    assert.matches("  problem    the Domain's identity file names another Domain\n", t, 1, true)
    assert.is_nil(t:find("  profile    ", 1, true))
  end)

  it("escapes what came from disk", function()
    local t = report.list_text({ domain({ profile = "dev", workspace = "/w/\27]0;pwned\7x",
      anchors = { { path = "/a\nb", bytes = 1, files = 1, incomplete = false } } }) })
    assert.is_nil(t:find("\27", 1, true))
    assert.matches("/w/\\e]0;pwned\\x07x", t, 1, true)
    assert.matches("/a\\nb", t, 1, true)
  end)

  it("names a Domain whose removal was interrupted and how to finish it", function()
    local id = string.rep("cd", 32)
    local t = report.list_text({ domain(), { id = id, removal_interrupted = true, anchors = {}, leases = 0 } })
    assert.matches("Domain " .. id .. "\n  an earlier removal of it was interrupted: `lazaret state rm " .. id ..
                   "` finishes it\n", t, 1, true)
    local j = report.list_json({ domain(), { id = id, removal_interrupted = true, anchors = {}, leases = 0 } })
    assert.matches('"removal_interrupted":false', j, 1, true)
    assert.matches('"id":"' .. id .. '"', j, 1, true)
    assert.matches('"removal_interrupted":true', j, 1, true)
  end)

  it("says so when there is no Domain", function()
    assert.matches("no Domains yet", report.list_text({}))
  end)

  it("encodes JSON with nulls for what is unknown", function()
    local j = report.list_json({ domain({ profile = false, workspace = false, problem = "x",
      anchors = { { path = "/usr" } }, ignored = false }) })
    assert.matches('"profile":null', j, 1, true)
    assert.matches('"problem":"x"', j, 1, true)
    assert.matches('"anchors":[{"path":"/usr","upper":null}]', j, 1, true)
    assert.matches('"ignored":null', j, 1, true)
    assert.equal("\n", j:sub(-1))
  end)

  it("marks the spaces of a changed name that would not show", function()
    local summary = { domain_id = "d", profile = "dev", workspace = "/w  x" }
    local t = report.inspect_text(summary, { artifact = "a1", anchors = {
      { path = "/home/u", total = 2, incomplete = false, changes = {
        { kind = "added", path = "hooks  (directory)", mode = 0x41ed, size = 4096 },
        { kind = "changed", path = ".bashrc ", mode = 0x81a4, size = 7 },
      } } } })
    assert.matches("  added    /home/u/hooks\\x20\\x20(directory)  (directory)\n", t, 1, true)
    assert.matches("  changed  /home/u/.bashrc\\x20  (7 B)\n", t, 1, true)
    assert.matches("  workspace  /w\\x20\\x20x\n", t, 1, true)
    -- JSON keeps the name as it is: its quotes show every space
    local j = report.inspect_json(summary, { anchors = { { path = "/home/u", total = 1, incomplete = false,
      changes = { { kind = "changed", path = ".bashrc ", mode = 0x81a4, size = 7 } } } } })
    assert.matches('"path":"/home/u/.bashrc "', j, 1, true)
  end)

  it("shows each change of an inspection with its kind and size, escaped", function()
    local summary = { domain_id = "d", profile = "dev", workspace = "/w" }
    local t = report.inspect_text(summary, { artifact = "a1", anchors = {
      { path = "/usr", total = 5, incomplete = false, changes = {
        { kind = "added", path = "local", mode = 0x41ed, size = 4096 },
        { kind = "added", path = "local/big", mode = 0x81a4, size = 1048576 },
        { kind = "changed", path = "bin/l\27[2Js", mode = 0xa1ff, size = 7 },
        { kind = "deleted", path = "share/x", mode = 0, size = 0 },
      } },
      { path = "/", total = 1, incomplete = true, changes = {
        { kind = "opaque", path = "etc", mode = 0x41ed, size = 0 } } },
      { path = "/opt", total = 3145728, incomplete = true, limit = "held", changes = {} },
    } })
    assert.matches("compared with prepared image a1\n", t, 1, true)
    assert.matches("/usr: 5 changes\n", t, 1, true)
    assert.matches("  added    /usr/local  (directory)\n", t, 1, true)
    assert.matches("  added    /usr/local/big  (1.0 MiB)\n", t, 1, true)
    assert.matches("  changed  /usr/bin/l\\e[2Js  (symlink)\n", t, 1, true)
    assert.matches("  deleted  /usr/share/x\n", t, 1, true)
    assert.matches("  ... and 1 more (--max N lists more)\n", t, 1, true)
    assert.matches("/: 1 change (at least: not all could be read)\n  opaque   /etc  (directory)\n", t, 1, true)
    assert.matches("/opt: 3145728 changes (at least: the listing stopped at the 64 MiB held for names; "
      .. "`lazaret state reset` clears them)\n", t, 1, true)
    local none = report.inspect_text(summary, { anchors = {} })
    assert.matches("the profile's image is not prepared", none, 1, true)
    assert.matches("no kept state", none, 1, true)
    local j = report.inspect_json(summary, { anchors = { { path = "/usr", total = 1, incomplete = false,
      changes = { { kind = "deleted", path = "x", mode = 0, size = 0 } } } } })
    assert.matches('"artifact":null', j, 1, true)
    assert.matches('{"kind":"deleted","mode":0,"path":"/usr/x","size":0}', j, 1, true)
  end)

  it("prints each verification check and the verdict", function()
    local summary = { domain_id = "d", profile = "dev", workspace = "/w" }
    local ok = report.verify_text(summary, {
      { check = "identity", ok = true, detail = "profile dev, workspace /w" },
      { check = "leases", ok = true, detail = "none held" },
    })
    assert.matches("  ok   identity      profile dev, workspace /w\n", ok, 1, true)
    assert.matches("verified: no problem found\n", ok, 1, true)
    local bad = report.verify_text(summary, {
      { check = "anchor", ok = false, detail = "/usr: its upper layer is not a directory\27[0m" },
      { check = "leftovers", ok = false, detail = "1 tree set aside" },
    })
    assert.matches("  FAIL anchor        /usr: its upper layer is not a directory\\e[0m\n", bad, 1, true)
    assert.matches("verified: 2 problems\n", bad, 1, true)
    local j = report.verify_json(summary, { { check = "leases", ok = false, detail = "x" } })
    assert.matches('"checks":[{"check":"leases","detail":"x","ok":false}]', j, 1, true)
  end)

  it("shows the Domain a removal deletes", function()
    local t = report.remove_scope("ab", { profile = "dev", workspace = "/gone/\27[1mx" })
    assert.matches("  Domain     ab\n  profile    dev\n  workspace  /gone/\\e[1mx  (gone)\n", t, 1, true)
    assert.matches("Prepared images stay", t, 1, true)
  end)

  it("says a Domain never launched holds nothing", function()
    local t = report.remove_scope("ab", { profile = "", workspace = "", never_launched = true })
    assert.matches("  Domain     ab\n  never launched: its directory is empty", t, 1, true)
    assert.is_nil(t:find("  profile    ", 1, true))
  end)

  it("shows the resolved Domain and the exact scope of a reset", function()
    local t = report.reset_scope({ domain_id = string.rep("cd", 32), profile = "dev",
      workspace = "/home/me/p" }, { "/etc", "/usr/local" })
    assert.matches("  Domain     " .. string.rep("cd", 32) .. "\n", t, 1, true)
    assert.matches("  profile    dev\n  workspace  /home/me/p\n", t, 1, true)
    assert.matches("    /etc\n    /usr/local\n", t, 1, true)
    local none = report.reset_scope({ domain_id = "x", profile = "dev", workspace = "/w" }, {})
    assert.matches("nothing to reset", none, 1, true)
  end)
end)
