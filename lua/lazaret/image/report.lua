-- Formatting for `lazaret image ...` (pure functions of data).
--
-- Text that is not Lazaret's own is escaped for the terminal
-- (core/util/escape.h) before it is printed: the image reference as it was
-- given, digests read from a layout, the sources, IDs and states the
-- catalog holds, and the names gc found in the Storage Root's directories
-- (anything may sit there). A hostile reference or tree name must not
-- drive the developer's terminal, nor through `image list --json` printed
-- to it: there a string of printable ASCII keeps its value (lazaret.json
-- escapes quotes and backslashes), and any other is given escaped, as the
-- text report shows it (lazaret.json would pass C1 controls and refuse
-- invalid UTF-8).
local M = {}

local json = require("lazaret.json")
local ipairs, type, tostring, require = ipairs, type, tostring, require
local string_format, string_rep, table_concat, math_floor =
  string.format, string.rep, table.concat, math.floor

local escaped = require("lazaret.shown")
local function shown(s)
  return escaped(tostring(s))
end

-- Escaped as everywhere else (lazaret.shown): a backslash too, so the
-- escape of a control character and the same text typed cannot read alike.
local function json_string(s)
  return escaped(s)
end

function M.bytes(n)
  local units = { "B", "KiB", "MiB", "GiB", "TiB" }
  local i, v = 1, n
  while v >= 1024 and i < #units do
    v = v / 1024
    i = i + 1
  end
  if i == 1 then
    return string_format("%d B", n)
  end
  return string_format("%.1f %s", v, units[i])
end

-- Returns a renderer: render(layer, n, done, total, waiting) -> text or
-- nil; render(nil) -> the closing text. On a terminal it redraws one line
-- (a bar over layers and bytes); otherwise it prints one line per layer.
-- waiting: an image gc holds the Storage Root, which is said before the
-- preparation waits for it.
function M.progress(tty)
  local last_layer = -1
  local drew = false
  return function(layer, n, done, total, waiting)
    if layer == nil then
      if tty and drew then return "\n" end
      return nil
    end
    if waiting then
      return "waiting for an image gc of this Storage Root to finish " ..
        "(`lazaret image gc`, or a launch's automatic one)\n"
    end
    if tty then
      local width = 30
      local frac = total > 0 and done / total or 1
      if frac > 1 then frac = 1 end
      local fill = math_floor(frac * width + 0.5)
      drew = true
      return string_format("\r[%s%s] layer %d/%d  %s / %s ", string_rep("#", fill),
        string_rep(".", width - fill), layer, n, M.bytes(done), M.bytes(total))
    end
    if layer ~= last_layer and layer > 0 then
      last_layer = layer
      return string_format("applying layer %d/%d (%s of %s done)\n", layer, n, M.bytes(done),
        M.bytes(total))
    end
    return nil
  end
end

function M.prepared(image, r)
  local lines = {
    (r.existed and "already prepared: " or "prepared: ") .. shown(image),
    string_format("%-12s%s", "artifact:", shown(r.artifact_id)),
    string_format("%-12s%s", "manifest:", shown(r.manifest_digest)),
    string_format("%-12s%s", "size:", M.bytes(r.size)),
  }
  if r.skipped_devices and r.skipped_devices > 0 then
    lines[#lines + 1] = string_format("%-12s%d device nodes skipped (not creatable in a user "
      .. "namespace)", "note:", r.skipped_devices)
  end
  return table_concat(lines, "\n") .. "\n"
end

function M.list_text(rows)
  if #rows == 0 then
    return "no prepared images\n"
  end
  local out = { string_format("%-16s %-11s %10s %6s  %s", "ARTIFACT", "STATE", "SIZE", "LEASES",
    "SOURCE") }
  for _, r in ipairs(rows) do
    out[#out + 1] = string_format("%-16s %-11s %10s %6d  %s", shown(r.id:sub(1, 16)),
      shown(r.state), M.bytes(r.size), r.leases, shown(r.source))
  end
  return table_concat(out, "\n") .. "\n"
end

function M.list_json(rows)
  local v = {}
  for i, r in ipairs(rows) do
    v[i] = {
      artifact_id = json_string(r.id), source = json_string(r.source),
      manifest_digest = json_string(r.manifest_digest), config_digest = json_string(r.config_digest),
      size = r.size, leases = r.leases, state = json_string(r.state), created = r.created,
    }
  end
  return json.encode({ images = v }) .. "\n"
end

local verbs = {
  ["removed"] = "removed unleased artifact",
  ["would-remove"] = "would remove unleased artifact",
  ["kept-leased"] = "kept leased artifact",
  ["kept-foreign"] = "kept unknown tree (not in the catalog)",
  ["kept-preparing"] = "kept preparation in progress",
  ["removed-abandoned"] = "removed abandoned preparation",
  ["would-remove-abandoned"] = "would remove abandoned preparation",
  ["kept-policy"] = "kept unleased artifact (among the newest storage.keep_unused_images keeps)",
}

function M.gc_text(items, dry_run)
  local out = {}
  for _, it in ipairs(items) do
    local extra = it.action == "kept-leased" and string_format(" (%d leases)", it.leases) or ""
    out[#out + 1] = string_format("%s: %s/%s%s", verbs[it.action] or shown(it.action),
      shown(it.where), shown(it.name), extra)
  end
  if #out == 0 then
    out[1] = dry_run and "nothing to reclaim" or "nothing reclaimed"
  end
  return table_concat(out, "\n") .. "\n"
end

return M
