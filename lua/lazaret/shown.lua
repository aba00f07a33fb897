-- A string as the terminal may be given it. Printable ASCII other than the
-- backslash is its own escape in the C escaper (lazaret.core.text), so such
-- text, all Lazaret writes of its own, comes back as it is without loading
-- the C module (a report stays usable where the bindings are not loaded);
-- anything else goes through it. A value that is not a string comes back
-- as it is.
local find, type = string.find, type
local text_escape

return function(s)
  if type(s) ~= "string" or not find(s, "[\0-\31\\\127-\255]") then
    return s
  end
  text_escape = text_escape or require("lazaret.core.text").escape
  return text_escape(s)
end
