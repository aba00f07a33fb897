-- lazaret.diag.image: formatting of `lazaret image prepare|list|gc` (pure
-- functions from data to text or JSON; no C module needed).
local report = require("lazaret.image.report")
local json = require("lazaret.json")

local ID = string.rep("0123456789abcdef", 4)
local MANIFEST = "sha256:" .. string.rep("ab", 32)
local CONFIG = "sha256:" .. string.rep("cd", 32)

local function row(over)
  local r = {
    id = ID, source = "oci:/srv/img:latest", manifest_digest = MANIFEST,
    config_digest = CONFIG, size = 3 * 1024 * 1024, leases = 2, state = "published",
    created = 1700000000,
  }
  for k, v in pairs(over or {}) do r[k] = v end
  return r
end

local function count(s, pattern)
  local n = 0
  for _ in s:gmatch(pattern) do n = n + 1 end
  return n
end

describe("lazaret.image.report", function()
  describe("bytes", function()
    it("prints whole bytes below 1 KiB", function()
      assert.equal("0 B", report.bytes(0))
      assert.equal("1 B", report.bytes(1))
      assert.equal("1023 B", report.bytes(1023))
    end)

    it("prints binary units with one decimal from 1 KiB up", function()
      assert.equal("1.0 KiB", report.bytes(1024))
      assert.equal("1.5 KiB", report.bytes(1536))
      assert.equal("1024.0 KiB", report.bytes(1024 * 1024 - 1))
      assert.equal("1.0 MiB", report.bytes(1024 * 1024))
      assert.equal("2.5 MiB", report.bytes(5 * 512 * 1024))
      assert.equal("5.0 GiB", report.bytes(5 * 1024 ^ 3 // 1))
      assert.equal("1.0 TiB", report.bytes(1024 ^ 4 // 1))
    end)

    it("stops at TiB", function()
      assert.equal("1024.0 TiB", report.bytes(1024 ^ 5 // 1))
    end)
  end)

  describe("progress on a terminal", function()
    it("redraws one line with \\r and never ends a line while drawing", function()
      local render = report.progress(true)
      local a = render(1, 2, 0, 1000)
      local b = render(1, 2, 500, 1000)
      local c = render(2, 2, 1000, 1000)
      for _, line in ipairs({ a, b, c }) do
        assert.matches("^\r%[", line)
        assert.is_nil(line:find("\n", 1, true))
      end
      assert.matches("layer 1/2", a)
      assert.matches("layer 2/2", c)
      assert.matches("500 B / 1000 B", b)
    end)

    it("draws a 30-column bar in proportion to the bytes done", function()
      local render = report.progress(true)
      local function bar(done, total)
        return render(1, 1, done, total):match("^\r%[([#.]+)%]")
      end
      assert.equal(string.rep(".", 30), bar(0, 100))
      assert.equal(string.rep("#", 15) .. string.rep(".", 15), bar(50, 100))
      assert.equal(string.rep("#", 30), bar(100, 100))
      assert.equal(string.rep("#", 30), bar(200, 100), "more than the total is clamped")
      assert.equal(string.rep("#", 30), bar(0, 0), "an empty image is complete")
    end)

    it("redraws even for repeated progress of the same layer", function()
      local render = report.progress(true)
      assert.is_string(render(1, 1, 10, 100))
      assert.is_string(render(1, 1, 10, 100))
    end)

    it("ends with a single newline once something was drawn", function()
      local render = report.progress(true)
      render(1, 1, 1, 2)
      assert.equal("\n", render(nil))
    end)

    it("prints nothing at the end when nothing was drawn", function()
      assert.is_nil(report.progress(true)(nil))
    end)
  end)

  describe("waiting for an image gc", function()
    it("says so on a line of its own, on a terminal or not", function()
      for _, tty in ipairs({ true, false }) do
        local render = report.progress(tty)
        local line = render(0, 2, 0, 100, true)
        assert.matches("^waiting for an image gc of this Storage Root to finish", line)
        assert.equal("\n", line:sub(-1))
        assert.is_nil(line:find("\r", 1, true))
        assert.is_nil(render(nil), "nothing drawn yet, nothing to end")
      end
    end)
  end)

  describe("progress off a terminal", function()
    it("prints one line per layer and nothing for repeated progress", function()
      local render = report.progress(false)
      local out = {}
      local calls = {
        { 0, 3, 0, 4096 }, { 1, 3, 0, 4096 }, { 1, 3, 1024, 4096 }, { 1, 3, 2048, 4096 },
        { 2, 3, 2048, 4096 }, { 2, 3, 3000, 4096 }, { 3, 3, 3072, 4096 }, { 3, 3, 4096, 4096 },
      }
      for _, c in ipairs(calls) do
        local line = render(table.unpack(c))
        if line then out[#out + 1] = line end
      end
      assert.same({
        "applying layer 1/3 (0 B of 4.0 KiB done)\n",
        "applying layer 2/3 (2.0 KiB of 4.0 KiB done)\n",
        "applying layer 3/3 (3.0 KiB of 4.0 KiB done)\n",
      }, out)
    end)

    it("prints nothing before the first layer, no carriage return, nothing at the end", function()
      local render = report.progress(false)
      assert.is_nil(render(0, 1, 0, 10))
      local line = render(1, 1, 0, 10)
      assert.is_nil(line:find("\r", 1, true))
      assert.equal(1, count(line, "\n"))
      assert.is_nil(render(nil))
    end)
  end)

  describe("prepared", function()
    local result = { artifact_id = ID, manifest_digest = MANIFEST, config_digest = CONFIG,
      size = 2048, skipped_devices = 0, existed = false }

    it("names the image, the artifact, the manifest and the size", function()
      local text = report.prepared("oci:/srv/img", result)
      assert.equal(table.concat({
        "prepared: oci:/srv/img",
        "artifact:   " .. ID,
        "manifest:   " .. MANIFEST,
        "size:       2.0 KiB",
      }, "\n") .. "\n", text)
    end)

    it("says when the image was already prepared", function()
      local r = {}
      for k, v in pairs(result) do r[k] = v end
      r.existed = true
      local text = report.prepared("oci:/srv/img", r)
      assert.matches("^already prepared: oci:/srv/img\n", text)
      assert.matches("\nartifact: +" .. ID .. "\n", text)
    end)

    it("notes skipped device nodes only when there are some", function()
      assert.is_nil(report.prepared("x", result):find("note:", 1, true))
      local r = {}
      for k, v in pairs(result) do r[k] = v end
      r.skipped_devices = nil
      assert.is_nil(report.prepared("x", r):find("note:", 1, true))
      r.skipped_devices = 7
      local text = report.prepared("x", r)
      assert.matches("\nnote: +7 device nodes skipped %(not creatable in a user namespace%)\n$",
        text)
    end)
  end)

  describe("list_text", function()
    it("says so when there are no prepared images", function()
      assert.equal("no prepared images\n", report.list_text({}))
    end)

    it("prints a header and one line per artifact with a short ID", function()
      local text = report.list_text({ row(), row({ id = string.rep("f", 64), leases = 0,
        state = "quarantined", size = 10, source = "docker://debian:12" }) })
      local lines = {}
      for l in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
      assert.equal(3, #lines)
      assert.matches("^ARTIFACT +STATE +SIZE +LEASES +SOURCE$", lines[1])
      assert.matches("^0123456789abcdef published +3%.0 MiB +2  oci:/srv/img:latest$", lines[2])
      assert.matches("^ffffffffffffffff quarantined +10 B +0  docker://debian:12$", lines[3])
      assert.is_nil(text:find(ID, 1, true), "the full ID is not printed")
    end)
  end)

  describe("list_json", function()
    it("emits one object with an images array, via lazaret.json", function()
      local out = report.list_json({ row() })
      assert.matches("^{.*}\n$", out)
      assert.equal(1, count(out, "\n"))
      local want = json.encode({ images = { {
        artifact_id = ID, source = "oci:/srv/img:latest", manifest_digest = MANIFEST,
        config_digest = CONFIG, size = 3 * 1024 * 1024, leases = 2, state = "published",
        created = 1700000000,
      } } }) .. "\n"
      assert.equal(want, out)
    end)

    it("carries the documented keys and renames id to artifact_id", function()
      local out = report.list_json({ row() })
      for _, key in ipairs({ "artifact_id", "source", "manifest_digest", "config_digest", "size",
        "leases", "state", "created" }) do
        assert.matches('"' .. key .. '":', out)
      end
      assert.is_nil(out:find('"id":', 1, true))
      assert.matches('"size":3145728', out)
      assert.matches('"leases":2', out)
    end)

    it("emits an empty array when there are no images", function()
      assert.equal('{"images":[]}\n', report.list_json({}))
    end)

    it("escapes sources as JSON strings", function()
      -- (a backslash goes through the C escaper: report_escape_spec.lua)
      local out = report.list_json({ row({ source = 'oci:/a "b"' }) })
      assert.matches('"source":"oci:/a \\"b\\""', out, 1, true)
    end)
  end)

  describe("gc_text", function()
    local function item(action, name, leases)
      return { action = action, where = "prepared", name = name or "a1", leases = leases or 0 }
    end

    it("describes every action", function()
      local cases = {
        { item("removed"), "removed unleased artifact: prepared/a1" },
        { item("would-remove"), "would remove unleased artifact: prepared/a1" },
        { item("kept-leased", "a1", 3), "kept leased artifact: prepared/a1 (3 leases)" },
        { item("kept-foreign", "junk"), "kept unknown tree (not in the catalog): prepared/junk" },
        { { action = "kept-preparing", where = "staging", name = "op1", leases = 0 },
          "kept preparation in progress: staging/op1" },
        { { action = "removed-abandoned", where = "staging", name = "op2", leases = 0 },
          "removed abandoned preparation: staging/op2" },
        { { action = "would-remove-abandoned", where = "staging", name = "op3", leases = 0 },
          "would remove abandoned preparation: staging/op3" },
      }
      for _, c in ipairs(cases) do
        assert.equal(c[2] .. "\n", report.gc_text({ c[1] }, false), c[1].action)
      end
    end)

    it("prints an unknown action as it is", function()
      assert.equal("frobbed: quarantine/x\n",
        report.gc_text({ { action = "frobbed", where = "quarantine", name = "x", leases = 0 } }))
    end)

    it("prints one line per decision in order", function()
      local text = report.gc_text({ item("kept-leased", "a", 1), item("removed", "b") }, false)
      assert.equal("kept leased artifact: prepared/a (1 leases)\n"
        .. "removed unleased artifact: prepared/b\n", text)
    end)

    it("says when there is nothing to do", function()
      assert.equal("nothing reclaimed\n", report.gc_text({}, false))
      assert.equal("nothing to reclaim\n", report.gc_text({}, true))
    end)
  end)

  it("leaks no globals", function()
    local before = {}
    for k in pairs(_G) do before[k] = true end
    package.loaded["lazaret.image.report"] = nil
    local m = require("lazaret.image.report")
    m.progress(true)(1, 1, 1, 1)
    m.list_text({ row() })
    m.gc_text({}, true)
    for k in pairs(_G) do
      assert.is_true(before[k] ~= nil, "global leaked: " .. tostring(k))
    end
  end)
end)
