-- An example diag report: `lazaret diag --report examples/report.lua`.
-- Prints one line: is this host ready to run sandboxes, and if not, which
-- checks fail and the first thing to do. The API is in docs/reports.md;
-- the exit status follows the verdict returned at the end (0 ready, 1 not).
local lazaret = ...

local problems, first_fix = {}, nil
for _, c in ipairs(lazaret.checks()) do
  if c.status ~= "ok" then
    problems[#problems + 1] = c.name
    first_fix = first_fix or c.fix
  end
end

local kernel = lazaret.probe.kernel()
local id = lazaret.probe.identity()
local host = string.format("%s@%s", id and (id.user or ("uid " .. id.uid)) or "?",
  kernel and kernel.release or "unknown kernel")

if #problems == 0 then
  print(string.format("lazaret %s: %s: ready", lazaret.version, host))
else
  print(string.format("lazaret %s: %s: not ready (%s); first: %s", lazaret.version, host,
    table.concat(problems, ", "), first_fix or "see lazaret diag"))
end
return #problems == 0
