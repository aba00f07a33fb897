-- busted spec for lua/lazaret/json.lua (pure Lua; no C module needed).
local json = require("lazaret.json")

local function globals()
  local names = {}
  for k in pairs(_G) do
    names[k] = true
  end
  return names
end

describe("lazaret.json", function()
  describe("encode", function()
    it("encodes booleans, integers and null", function()
      assert.are.equal("true", json.encode(true))
      assert.are.equal("false", json.encode(false))
      assert.are.equal("0", json.encode(0))
      assert.are.equal("-42", json.encode(-42))
      assert.are.equal("9223372036854775807", json.encode(math.maxinteger))
      assert.are.equal("-9223372036854775808", json.encode(math.mininteger))
      assert.are.equal("null", json.encode(json.null))
    end)

    it("encodes a table with keys 1..n as an array and an empty table as []", function()
      assert.are.equal("[1,2,3]", json.encode({ 1, 2, 3 }))
      assert.are.equal("[]", json.encode({}))
      assert.are.equal('[[],["a",null]]', json.encode({ {}, { "a", json.null } }))
    end)

    it("encodes string-keyed tables as objects with keys in byte order", function()
      local t = { b = 1, a = 2, B = 3, ["a\0"] = 4, ["\u{e9}"] = 5, aa = 6 }
      assert.are.equal('{"B":3,"a":2,"a\\u0000":4,"aa":6,"b":1,"\u{e9}":5}', json.encode(t))
    end)

    it("gives the same bytes whatever the insertion order", function()
      local a, b = {}, {}
      for i = 1, 200 do
        a["k" .. i] = i
      end
      for i = 200, 1, -1 do
        b["k" .. i] = i
      end
      assert.are.equal(json.encode(a), json.encode(b))
      assert.are.equal(json.encode(a), json.encode(a))
    end)

    it("escapes quotes, backslashes and every control character as \\u00XX", function()
      assert.are.equal('"say \\"hi\\" \\\\ /"', json.encode('say "hi" \\ /'))
      assert.are.equal('"\\u0000\\u0001\\u0008\\u0009\\u000a\\u000d\\u001b\\u001f\\u007f"',
        json.encode("\0\1\b\t\n\r\27\31\127"))
      for c = 0, 31 do
        assert.are.equal(string.format('"\\u%04x"', c), json.encode(string.char(c)))
      end
    end)

    it("keeps valid UTF-8 as it is", function()
      local s = "caf\u{e9} \u{2603} \u{1f600}"
      assert.are.equal('"' .. s .. '"', json.encode(s))
    end)

    it("raises on invalid UTF-8", function()
      for _, bad in ipairs({ "\xff", "ab\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80" }) do
        assert.has_error(function()
          json.encode(bad)
        end)
      end
      assert.error_matches(function()
        json.encode({ name = "x\xffy" })
      end, "invalid UTF%-8 in string at byte 2")
      assert.has_error(function()
        json.encode({ ["k\xff"] = 1 })
      end)
    end)

    it("raises on floats, even integral ones", function()
      for _, f in ipairs({ 1.5, 1.0, -0.0, math.huge, -math.huge, 0 / 0 }) do
        assert.error_matches(function()
          json.encode({ f })
        end, "integers only")
      end
    end)

    it("raises on nil, functions, userdata and threads", function()
      assert.error_matches(function()
        json.encode(nil)
      end, "use json.null")
      assert.has_error(function()
        json.encode(print)
      end)
      assert.has_error(function()
        json.encode(io.stdout)
      end)
      assert.has_error(function()
        json.encode(coroutine.create(print))
      end)
    end)

    it("raises on sparse arrays and keys JSON cannot express", function()
      assert.error_matches(function()
        json.encode({ [1] = 1, [3] = 3 })
      end, "sparse array")
      assert.error_matches(function()
        json.encode({ [2] = 1 })
      end, "sparse array")
      assert.has_error(function()
        json.encode({ [0] = 1 })
      end)
      assert.has_error(function()
        json.encode({ [-1] = 1 })
      end)
      assert.has_error(function()
        json.encode({ [1.5] = 1 })
      end)
      assert.has_error(function()
        json.encode({ [true] = 1 })
      end)
      assert.error_matches(function()
        json.encode({ 1, a = 2 })
      end, "mixes string and integer keys")
    end)

    it("raises on cycles but accepts a shared subtable", function()
      local t = {}
      t.self = t
      assert.error_matches(function()
        json.encode(t)
      end, "cycle")
      local shared = { 1 }
      assert.are.equal('{"a":[1],"b":[1]}', json.encode({ a = shared, b = shared }))
    end)

    it("raises on nesting deeper than 64 levels", function()
      local deep = {}
      local t = deep
      for _ = 1, 64 do
        t[1] = {}
        t = t[1]
      end
      assert.has_error(function()
        json.encode(deep)
      end)
      local ok = {}
      t = ok
      for _ = 1, 62 do
        t[1] = {}
        t = t[1]
      end
      assert.is_string(json.encode(ok))
    end)
  end)

  describe("null", function()
    it("is a unique read-only value that prints as json.null", function()
      assert.are.equal("json.null", tostring(json.null))
      assert.has_error(function()
        json.null.x = 1
      end)
      assert.is_false(json.null == {})
    end)
  end)

  it("leaks no globals", function()
    local before = globals()
    package.loaded["lazaret.json"] = nil
    local fresh = require("lazaret.json")
    package.loaded["lazaret.json"] = json
    assert.are.equal("[]", fresh.encode({}))
    assert.are.same(before, globals())
  end)
end)
