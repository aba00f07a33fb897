-- Formatting of `lazaret config check` (pure: summary table -> text).
-- The summary comes from lazaret.core.config and never holds env values.
local M = {}

local json = require("lazaret.json")
local ipairs, string_format, table_concat = ipairs, string.format, table.concat

-- The paths are the developer's, but the workspace's last components may
-- be names the sandbox made (the workspace is the current directory):
-- escaped in the text and in JSON alike, which is read on a terminal too.
local shown = require("lazaret.shown")

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
      out[#out + 1] = string_format("%-14s%s", row[1] .. ":", shown(v))
    end
  end
  out[#out + 1] = string_format("%-14s%d", "runsc dcache:", s.runsc_dcache)
  -- runtime/memwatch.h: a sandbox past it ends its generation.
  if (s.max_memory_mib or 0) > 0 then
    out[#out + 1] = string_format("%-14s%d MiB per sandbox", "max memory:", s.max_memory_mib)
  else
    out[#out + 1] = string_format("%-14s%s", "max memory:", "half of the host's memory per sandbox")
  end
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
    config = shown(s.source),
    storage_root = shown(s.storage_root),
    runtime_root = shown(s.runtime_root),
    profile = s.profile or json.null,
    workspace = shown(s.workspace) or json.null,
    domain_id = s.domain_id or json.null,
    fingerprint = s.fingerprint or json.null,
    runsc_dcache = s.runsc_dcache,
    max_memory_mib = (s.max_memory_mib or 0) > 0 and s.max_memory_mib or json.null,
    keep_unused_images = s.keep_unused_images or 0,
    profiles = s.profiles,
  }) .. "\n"
end

return M
