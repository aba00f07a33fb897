-- A small, strict, deterministic JSON encoder (RFC 8259) for reports
-- (`lazaret diag --json`, `lazaret config check --json`).
--
-- Mapping:
--   table    only integer keys 1..n (or empty) -> array; only string keys
--            -> object, keys in byte order (independent of the locale), so
--            the same value always encodes to the same bytes; any other key
--            mix (sparse arrays, float or boolean keys, strings mixed with
--            integers) raises. An empty table encodes as [].
--   string   must be valid UTF-8 (raises otherwise: a report must not carry
--            bytes a reader would replace or reject); '"' and '\' escaped,
--            control characters (U+0000..U+001F, U+007F) as \u00XX.
--   number   integers only; floats raise (no locale or precision surprises).
--   boolean  true / false.
--   json.null  the JSON null; nil itself cannot be encoded (it cannot sit
--            in a table either).
-- Cycles and nesting deeper than MAX_DEPTH raise.
local M = {}

local error = error
local format = string.format
local byte = string.byte
local gsub = string.gsub
local char = string.char
local concat = table.concat
local sort = table.sort
local pairs = pairs
local type = type
local tostring = tostring
local math_type = math.type
local utf8_len = utf8.len
local setmetatable = setmetatable

local MAX_DEPTH = 64

-- The JSON null. A unique value: compare with `==`.
M.null = setmetatable({}, {
  __name = "lazaret.json.null",
  __tostring = function()
    return "json.null"
  end,
  __newindex = function()
    error("json.null is read-only", 2)
  end,
  __metatable = false,
})

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\" }
for c = 0, 0x1f do
  escapes[char(c)] = format("\\u%04x", c)
end
escapes["\127"] = "\\u007f"

local function encode_string(s)
  local ok, bad = utf8_len(s)
  if not ok then
    error(format("json: invalid UTF-8 in string at byte %d", bad), 0)
  end
  return '"' .. gsub(s, '[\0-\31"\\\127]', escapes) .. '"'
end

-- Byte-wise ordering: `<` on strings follows strcoll and thus the locale.
local function bytes_less(a, b)
  if a == b then
    return false
  end
  local n = #a < #b and #a or #b
  for i = 1, n do
    local x, y = byte(a, i), byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

local encode_value

local function encode_table(t, depth, seen, out)
  if seen[t] then
    error("json: cycle in value", 0)
  end
  if depth > MAX_DEPTH then
    error(format("json: nesting deeper than %d", MAX_DEPTH), 0)
  end
  seen[t] = true
  local count, strings, ints = 0, {}, 0
  for k in pairs(t) do
    count = count + 1
    if type(k) == "string" then
      strings[#strings + 1] = k
    elseif math_type(k) == "integer" and k >= 1 then
      ints = ints + 1
    else
      error(format("json: cannot encode table key %s (%s)", tostring(k), type(k)), 0)
    end
  end
  if #strings > 0 and ints > 0 then
    error("json: table mixes string and integer keys", 0)
  end
  if #strings == 0 then
    -- Keys are count distinct integers >= 1; they are 1..count iff all
    -- of 1..count are present.
    out[#out + 1] = "["
    for i = 1, count do
      local v = t[i]
      if v == nil then
        error(format("json: sparse array (no index %d of %d keys)", i, count), 0)
      end
      if i > 1 then
        out[#out + 1] = ","
      end
      encode_value(v, depth + 1, seen, out)
    end
    out[#out + 1] = "]"
  else
    sort(strings, bytes_less)
    out[#out + 1] = "{"
    for i = 1, #strings do
      local k = strings[i]
      if i > 1 then
        out[#out + 1] = ","
      end
      out[#out + 1] = encode_string(k)
      out[#out + 1] = ":"
      encode_value(t[k], depth + 1, seen, out)
    end
    out[#out + 1] = "}"
  end
  seen[t] = nil
end

function encode_value(v, depth, seen, out)
  local tv = type(v)
  if v == M.null then
    out[#out + 1] = "null"
  elseif tv == "string" then
    out[#out + 1] = encode_string(v)
  elseif tv == "number" then
    if math_type(v) ~= "integer" then
      error(format("json: cannot encode float %s (integers only)", tostring(v)), 0)
    end
    out[#out + 1] = format("%d", v)
  elseif tv == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif tv == "table" then
    encode_table(v, depth, seen, out)
  else
    error(format("json: cannot encode a %s value", tv), 0)
  end
end

-- json.encode(value) -> string; raises on anything JSON cannot say exactly.
function M.encode(value)
  if value == nil then
    error("json: cannot encode nil (use json.null)", 2)
  end
  local out = {}
  encode_value(value, 1, {}, out)
  return concat(out)
end

return M
