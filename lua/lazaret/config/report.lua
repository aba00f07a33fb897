-- Formatting of `lazaret config check` (pure: summary table -> text).
-- The summary comes from lazaret.core.config and never holds env values.
local M = {}

local json = require("lazaret.json")
local ipairs, string_format, table_concat = ipairs, string.format, table.concat

local rows = {
  { "config", "source" },
  { "storage root", "storage_root" },
  { "runtime root", "runtime_root" },
  { "profile", "profile" },
  { "workspace", "workspace" },
  { "domain id", "domain_id" },
  { "fingerprint", "fingerprint" },
}

function M.text(s)
  local out = {}
  for _, row in ipairs(rows) do
    local v = s[row[2]]
    if v ~= nil then
      out[#out + 1] = string_format("%-14s%s", row[1] .. ":", v)
    end
  end
  out[#out + 1] = string_format("%-14s%d", "runsc dcache:", s.runsc_dcache)
  if s.keep_unused_images > 0 then
    out[#out + 1] = string_format("%-14s%d unused images kept when a Domain's last session ends",
      "image gc:", s.keep_unused_images)
  end
  out[#out + 1] = string_format("%-14s%d", "profiles:", s.profiles)
  out[#out + 1] = "configuration is valid"
  return table_concat(out, "\n") .. "\n"
end

function M.json(s)
  return json.encode({
    ok = true,
    config = s.source,
    storage_root = s.storage_root,
    runtime_root = s.runtime_root,
    profile = s.profile or json.null,
    workspace = s.workspace or json.null,
    domain_id = s.domain_id or json.null,
    fingerprint = s.fingerprint or json.null,
    runsc_dcache = s.runsc_dcache,
    keep_unused_images = s.keep_unused_images or 0,
    profiles = s.profiles,
  }) .. "\n"
end

return M
