-- What the developer is shown of a string from the sandbox or from disk:
-- escaped (lazaret.core.text: control characters, escape sequences,
-- invalid UTF-8, bidirectional controls, blanks other than the space), and
-- the spaces that would not show (runs of them, one at either end) as
-- "\x20", so `hooks  (directory)` or `.bashrc ` cannot pass for another
-- name beside it.
local escape = require("lazaret.core.text").escape

return function(s)
  s = escape(s):gsub("  +", function(run) return ("\\x20"):rep(#run) end)
  return (s:gsub("^ ", "\\x20"):gsub(" $", "\\x20"))
end
