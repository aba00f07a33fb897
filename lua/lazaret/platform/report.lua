-- Formatting of `lazaret diag` reports: pure functions from a list of
-- checks to text. A check is {name=, status="ok"|"problem", detail=, fix=}
-- (fix only on problems); lua/lazaret/diag.lua builds them.
--
-- text: one aligned line per check, a "  fix: ..." line under each problem,
-- then "N checks, N problems". Details come from the host (tool output,
-- error messages, paths), so C0 control characters are shown as '?' and
-- anything past ASCII is escaped: nothing moves the cursor or changes the
-- terminal's mode (spec DX-5), and JSON stays valid UTF-8.
--
-- json: {"checks":[{"detail":..,"fix":..|null,"name":..,"status":..}, ...],
--        "summary":{"checks":N,"problems":N}}, keys sorted, one line.
local M = {}

local json = require("lazaret.json")

local concat = table.concat
local format = string.format
local gsub = string.gsub
local find = string.find
local rep = string.rep
local error = error
local ipairs = ipairs
local type = type

local STATUSES = { ok = true, problem = true }

-- Raises unless checks is a list of well-formed check tables.
local function validate(checks)
  if type(checks) ~= "table" then
    error("report: checks must be a list", 3)
  end
  for i, c in ipairs(checks) do
    if type(c) ~= "table" or type(c.name) ~= "string" or not STATUSES[c.status] then
      error(format("report: check %d needs a name and status ok|problem", i), 3)
    end
    if c.detail ~= nil and type(c.detail) ~= "string" then
      error(format("report: check %d (%s): detail must be a string", i, c.name), 3)
    end
    if c.fix ~= nil and type(c.fix) ~= "string" then
      error(format("report: check %d (%s): fix must be a string", i, c.name), 3)
    end
  end
end

-- Bytes past ASCII (a C1 control such as U+009B, the 8-bit CSI, or a
-- path that is not UTF-8) go through the C escaper (lazaret.core.text),
-- loaded only then, as the other reports do.
local text_escape
local function escaped(s)
  if s == nil or not find(s, "[\128-\255]") then
    return s
  end
  text_escape = text_escape or require("lazaret.core.text").escape
  return text_escape(s)
end

local function one_line(s)
  return escaped((gsub(s or "", "[\0-\31\127]", "?")))
end

local function count_problems(checks)
  local n = 0
  for _, c in ipairs(checks) do
    if c.status == "problem" then
      n = n + 1
    end
  end
  return n
end

local function plural(n, word)
  return format("%d %s%s", n, word, n == 1 and "" or "s")
end

-- report.text(checks) -> string (ends with a newline).
function M.text(checks)
  validate(checks)
  local status_width = #"problem" + 2
  local name_width = 0
  for _, c in ipairs(checks) do
    local n = #one_line(c.name)
    if n > name_width then
      name_width = n
    end
  end
  name_width = name_width + 2

  local out = {}
  for _, c in ipairs(checks) do
    local name = one_line(c.name)
    local line = c.status .. rep(" ", status_width - #c.status) .. name
      .. rep(" ", name_width - #name) .. one_line(c.detail)
    out[#out + 1] = (gsub(line, " +$", ""))
    if c.status == "problem" and c.fix ~= nil then
      out[#out + 1] = "  fix: " .. one_line(c.fix)
    end
  end
  out[#out + 1] = plural(#checks, "check") .. ", " .. plural(count_problems(checks), "problem")
  return concat(out, "\n") .. "\n"
end

-- report.json(checks) -> string (one JSON document and a newline).
function M.json(checks)
  validate(checks)
  local list = {}
  for i, c in ipairs(checks) do
    list[i] = {
      name = escaped(c.name),
      status = c.status,
      detail = escaped(c.detail or ""),
      fix = c.status == "problem" and escaped(c.fix) or json.null,
    }
  end
  return json.encode({
    checks = list,
    summary = { checks = #checks, problems = count_problems(checks) },
  }) .. "\n"
end

return M
