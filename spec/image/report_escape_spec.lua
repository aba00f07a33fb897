-- busted spec for lua/lazaret/image/report.lua: text that is not Lazaret's
-- own (an image reference, a catalog source, a tree name gc found) reaches
-- the terminal escaped (core/util/escape.h). The formatting itself is in
-- report_spec.lua.
require("lazaret_spec") -- lazaret.core.text (the escaper) is C

local report = require("lazaret.image.report")

-- ESC [ 2 J (clear the screen), the 8-bit CSI as a raw byte and as U+009B in
-- UTF-8, NEL (U+0085), a carriage return and a bell.
local HOSTILE = "oci:/srv/img\27[2J\155[31m\194\155[1m\194\133x\r\7:latest"

local ID = string.rep("0123456789abcdef", 4)
local DIGEST = "sha256:" .. string.rep("ab", 32)

-- Every byte printable ASCII, but the newlines that end lines.
local function assert_inert(text)
  assert.is_string(text)
  local i = text:find("[^\n\32-\126]")
  assert.is_nil(i, i and string.format("byte 0x%02x at %d in %q", text:byte(i), i, text))
  assert.is_nil(text:find("\27", 1, true))
  assert.is_nil(text:find("\194[\128-\159]"))
end

-- The hostile text, shown: every control visible for what it is.
local function assert_shows_escapes(text)
  assert.matches("\\e[2J", text, 1, true)
  assert.matches("\\x9b[31m", text, 1, true)
  assert.matches("\\u{009B}[1m", text, 1, true)
  assert.matches("\\u{0085}x\\r\\x07:latest", text, 1, true)
end

describe("lazaret.image.report escaping", function()
  it("escapes the image reference and the digests of a prepared image", function()
    local text = report.prepared(HOSTILE, {
      artifact_id = ID .. "\27]0;title\7", manifest_digest = DIGEST .. "\155", size = 1,
      skipped_devices = 0, existed = false,
    })
    assert_inert(text)
    assert_shows_escapes(text)
    assert.matches("^prepared: oci:/srv/img\\e%[2J", text)
    assert.equal(4, select(2, text:gsub("\n", "")), "one line per field")
  end)

  it("escapes the reference of an image already prepared", function()
    local text = report.prepared(HOSTILE, { artifact_id = ID, manifest_digest = DIGEST, size = 1,
      existed = true })
    assert_inert(text)
    assert.matches("^already prepared: oci:/srv/img\\e%[2J", text)
  end)

  it("escapes sources, IDs and states in image list", function()
    local text = report.list_text({ {
      id = "\27[2J" .. ID, source = HOSTILE, manifest_digest = DIGEST, config_digest = DIGEST,
      size = 10, leases = 0, state = "published\155", created = 1,
    } })
    assert_inert(text)
    assert_shows_escapes(text)
    assert.matches("\\e[2J0123456789ab", text, 1, true)
    assert.matches("published\\x9b", text, 1, true)
    assert.equal(2, select(2, text:gsub("\n", "")), "a header and one row")
  end)

  it("keeps a plain source as it is", function()
    local text = report.list_text({ { id = ID, source = "docker://debian:12", size = 10, leases = 0,
      state = "published" } })
    assert.matches("  docker://debian:12\n$", text)
  end)

  it("escapes names gc found and actions it does not know", function()
    local text = report.gc_text({
      { action = "kept-foreign", where = "prepared", name = "\27[2J\194\155junk\n", leases = 0 },
      { action = "frob\155", where = "staging\27", name = "op", leases = 0 },
    }, false)
    assert_inert(text)
    assert.matches("kept unknown tree (not in the catalog): prepared/\\e[2J\\u{009B}junk\\n\n",
      text, 1, true)
    assert.matches("frob\\x9b: staging\\e/op\n", text, 1, true)
    assert.equal(2, select(2, text:gsub("\n", "")), "one line per item")
  end)

  -- the lone 0x9b is not UTF-8: lazaret.json would refuse the whole list
  it("gives hostile strings escaped in image list --json, and a backslash doubled", function()
    local out = report.list_json({ {
      id = ID, source = HOSTILE, manifest_digest = DIGEST, config_digest = DIGEST,
      size = 10, leases = 0, state = "published", created = 1,
    }, {
      id = ID, source = 'oci:/a "b"\\c', manifest_digest = DIGEST, config_digest = DIGEST,
      size = 10, leases = 0, state = "published", created = 1,
    } })
    assert_inert(out)
    assert.matches('"source":"oci:/srv/img\\\\e[2J\\\\x9b[31m\\\\u{009B}[1m', out, 1, true)
    assert.matches('"source":"oci:/a \\"b\\"\\\\\\\\c"', out, 1, true)
  end)

  it("never shows a control character and text typed like its escape alike", function()
    local function source_of(src)
      return report.list_json({ {
        id = ID, source = src, manifest_digest = DIGEST, config_digest = DIGEST,
        size = 10, leases = 0, state = "published", created = 1,
      } }):match('"source":"(.-)","')
    end
    assert.are_not.equal(source_of("x\\u{202E}"), source_of("x\226\128\174"))
  end)
end)
