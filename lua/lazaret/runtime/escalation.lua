-- Host Escalation routing (spec 3.8, 3.4, 3.2; DX-4): where a verified
-- request goes, and what the developer is shown.
--
-- The coordinator calls M.route for each request whose signature, scope,
-- session capability and freshness it has checked. It bounds the answer
-- (core/runtime/coordinator.h): "auto" counts only when an auto_approve
-- rule matched exactly, "prompt" only in the requesting session's own
-- terminal; anything else denies. So this file orders and words the
-- decision; it cannot widen it.
local M = {}

local string_format, ipairs, table_concat = string.format, ipairs, table.concat

-- What the developer is shown of a string from the sandbox.
local shown = require("lazaret.blanks")

-- Columns a line takes at most: a character beyond ASCII counts as two, as
-- the coordinator counts (core/session/session.h, lz_session_prompt).
local function columns(c)
  return c < 0x80 and 1 or 2
end

-- A continued row starts with this mark, never with sandbox text.
local MARK = "           | "

-- Appends line to out in rows narrower than the terminal (max columns):
-- wrapping by the terminal would let a long field draw rows that start
-- like the prompt's own lines. Stops once out has more than cap rows (it
-- will not be shown: no need to fold the rest).
local function fold(out, line, max, cap)
  local row, w, limit, first = {}, 0, max, true
  for _, c in utf8.codes(line) do
    if w + columns(c) > limit then
      out[#out + 1] = (first and "" or MARK) .. table_concat(row)
      if #out > cap then
        return
      end
      row, w, limit, first = {}, 0, max - #MARK, false
    end
    row[#row + 1] = utf8.char(c)
    w = w + columns(c)
  end
  out[#out + 1] = (first and "" or MARK) .. table_concat(row)
end

-- The prompt, for a terminal in raw mode (hence "\r\n") of q.rows x
-- q.cols: every string from the sandbox shown (above), each argument on
-- its own numbered line, so what the developer reads is exactly the
-- vector the host will run; a line wider than the terminal continues on
-- marked rows. Nil and the reason when the whole prompt does not fit on
-- the screen at once (the coordinator checks the same).
function M.prompt_text(q)
  local cols, rows = q.cols or 80, q.rows or 24
  local lines = {
    "",
    "lazaret: the sandbox asks to run a command on the host, as you",
    string_format("  profile    %s", shown(q.profile)),
    string_format("  session    %s", shown(q.session)),
  }
  for i, arg in ipairs(q.argv) do
    lines[#lines + 1] = string_format("  argv[%d]    %s", i - 1, shown(arg))
  end
  lines[#lines + 1] = string_format("  runs in    the workspace on the host (asked from %s)", shown(q.cwd))
  if q.why ~= "" then
    lines[#lines + 1] = string_format("  why        %s", shown(q.why))
  end
  -- The answer line names the executable and the count again.
  lines[#lines + 1] = string_format("Approve running %s with %d argument%s? [y/N] ", shown(q.argv[1] or ""),
    #q.argv - 1, #q.argv == 2 and "" or "s")
  local max = cols - 1
  if max - #MARK < 16 then
    return nil, string_format("the developer's terminal is too narrow (%d columns) to show the request", cols)
  end
  local rows_out = {}
  for _, line in ipairs(lines) do
    fold(rows_out, line, max, rows)
    if #rows_out > rows then
      return nil, string_format("the request takes more lines than the developer's terminal has rows "
        .. "(%d): it cannot be shown whole; a larger terminal, or an auto_approve rule", rows)
    end
  end
  return table_concat(rows_out, "\r\n")
end

function M.route(q)
  if q.rule then
    return "auto", ""
  end
  if not q.terminal then
    return "deny", "this session has no terminal to ask the developer in, and no auto_approve rule "
      .. "matches the command exactly"
  end
  if q.prompt_busy then
    return "deny", "another request of this session is waiting for the developer's answer"
  end
  local text, why = M.prompt_text(q)
  if text == nil then
    return "deny", why
  end
  return "prompt", text
end

return M
