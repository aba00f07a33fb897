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

local escape = require("lazaret.core.text").escape
local string_format, ipairs, table_concat = string.format, ipairs, table.concat

-- The prompt, for a terminal in raw mode (hence "\r\n"). Every string from
-- the sandbox is escaped (control characters, escape sequences, invalid
-- UTF-8, bidirectional controls) and each argument is shown on its own
-- numbered line, so what the developer reads is exactly the vector the
-- host will run.
function M.prompt_text(q)
  local lines = {
    "",
    "lazaret: the sandbox asks to run a command on the host, as you",
    string_format("  profile    %s", escape(q.profile)),
    string_format("  session    %s", escape(q.session)),
  }
  for i, arg in ipairs(q.argv) do
    lines[#lines + 1] = string_format("  argv[%d]    %s", i - 1, escape(arg))
  end
  lines[#lines + 1] = string_format("  runs in    the workspace on the host (asked from %s)", escape(q.cwd))
  if q.why ~= "" then
    lines[#lines + 1] = string_format("  why        %s", escape(q.why))
  end
  -- The answer line names the executable and the count again: a long
  -- vector scrolls its first lines off the screen.
  lines[#lines + 1] = string_format("Approve running %s with %d argument%s? [y/N] ", escape(q.argv[1] or ""),
    #q.argv - 1, #q.argv == 2 and "" or "s")
  return table_concat(lines, "\r\n")
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
  return "prompt", M.prompt_text(q)
end

return M
