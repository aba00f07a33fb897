-- Formatting for `lazaret state ...` (pure functions of data; spec 3.9,
-- DX-6): human-readable text and a stable JSON document. Every string that
-- came from disk (profile names, paths) is escaped for the terminal, and
-- in text the spaces that would not show are marked (lazaret.blanks).
local M = {}

local json = require("lazaret.json")
local escape = require("lazaret.core.text").escape
-- text for the terminal: runs of spaces and edge spaces marked too
local shown = require("lazaret.blanks")
local bytes = require("lazaret.image.report").bytes
local ipairs, string_format, table_concat, os_date = ipairs, string.format, table.concat, os.date

local function size(u)
  if not u or u.bytes == nil then return "size unknown" end
  local s = string_format("%s, %d file%s", bytes(u.bytes), u.files, u.files == 1 and "" or "s")
  if u.incomplete then s = s .. " (at least: not all could be read)" end
  return s
end

local function when(t)
  if t == nil or t == 0 then return "unknown" end
  return os_date("!%Y-%m-%d %H:%M UTC", t)
end

function M.list_text(domains)
  if #domains == 0 then
    return "no Domains yet (a Domain is made by the first launch of a profile in a workspace)\n"
  end
  local out = {}
  for _, d in ipairs(domains) do
    local head = "Domain " .. d.id
    if d.active then head = head .. "  (in use)" end
    out[#out + 1] = head
    if d.removal_interrupted then
      out[#out + 1] = "  an earlier removal of it was interrupted: `lazaret state rm " .. d.id .. "` finishes it"
      out[#out + 1] = ""
      goto next
    end
    if d.profile then
      out[#out + 1] = "  profile    " .. shown(d.profile)
      out[#out + 1] = "  workspace  " .. shown(d.workspace) .. (d.workspace_gone and "  (gone)" or "")
    end
    if d.problem then
      out[#out + 1] = "  problem    " .. escape(d.problem)
    end
    out[#out + 1] = "  last used  " .. when(d.last_use)
    out[#out + 1] = string_format("  leases     %d", d.leases)
    for _, a in ipairs(d.anchors) do
      out[#out + 1] = string_format("  anchor     %-20s %s", shown(a.path), size(a))
    end
    if d.ignored then
      out[#out + 1] = string_format("  ignored    %-20s %s", "(workspace)", size(d.ignored))
    end
    out[#out + 1] = ""
    ::next::
  end
  return table_concat(out, "\n")
end

local function usage_json(u)
  if not u or u.bytes == nil then return json.null end
  return { bytes = u.bytes, files = u.files, incomplete = u.incomplete }
end

function M.list_json(domains)
  local v = {}
  for i, d in ipairs(domains) do
    local anchors = {}
    for k, a in ipairs(d.anchors) do
      anchors[k] = { path = escape(a.path), upper = usage_json(a) }
    end
    v[i] = {
      id = d.id,
      profile = d.profile and escape(d.profile) or json.null,
      workspace = d.workspace and escape(d.workspace) or json.null,
      problem = d.problem and escape(d.problem) or json.null,
      active = d.active,
      workspace_gone = d.workspace_gone,
      removal_interrupted = d.removal_interrupted or false,
      last_use = d.last_use,
      leases = d.leases,
      anchors = anchors,
      ignored = usage_json(d.ignored),
    }
  end
  return json.encode({ domains = v }) .. "\n"
end

local S_IFMT, S_IFDIR, S_IFLNK = 0xF000, 0x4000, 0xA000

local function full(anchor, rel)
  return (anchor == "/" and "" or anchor) .. "/" .. rel
end

-- Why an inspection's listing stopped (core/fs/treescan.h limits): the
-- sandbox wrote more than a scan holds; a reset of the anchor clears it.
local cut_short = {
  depth = "the listing stopped at a directory nested too deep; `lazaret state reset` clears it",
  entries = "the listing stopped at 10 million entries; `lazaret state reset` clears them",
  held = "the listing stopped at the 64 MiB held for names; `lazaret state reset` clears them",
  path = "a path was too long to list; `lazaret state reset` clears it",
}

-- One line per change: what, where, and for a file its size (metadata
-- only, DX-6).
function M.inspect_text(summary, result)
  local out = {
    "Domain " .. summary.domain_id,
    "  profile    " .. shown(summary.profile),
    "  workspace  " .. shown(summary.workspace),
    "  compared with " .. (result.artifact and ("prepared image " .. result.artifact)
      or "nothing: the profile's image is not prepared, so everything counts as added"),
  }
  if result.egress then
    out[#out + 1] = string_format("  egress by name (the last launch with allow_domains): %d allowed, %d refused",
      result.egress.allowed, result.egress.refused)
  end
  if #result.anchors == 0 then
    out[#out + 1] = "  no kept state: the sandbox changed none of these persistent directories"
  end
  for _, a in ipairs(result.anchors) do
    out[#out + 1] = ""
    out[#out + 1] = string_format("%s: %d change%s%s", shown(a.path), a.total, a.total == 1 and "" or "s",
      a.incomplete and (" (at least: " .. (cut_short[a.limit] or "not all could be read") .. ")") or "")
    for _, c in ipairs(a.changes) do
      local kind = c.mode & S_IFMT
      local what = kind == S_IFDIR and "directory" or kind == S_IFLNK and "symlink"
        or (c.kind ~= "deleted" and bytes(c.size)) or ""
      out[#out + 1] = string_format("  %-8s %s%s", c.kind, shown(full(a.path, c.path)),
        what ~= "" and ("  (" .. what .. ")") or "")
    end
    if #a.changes < a.total then
      out[#out + 1] = string_format("  ... and %d more (--max N lists more)", a.total - #a.changes)
    end
  end
  return table_concat(out, "\n") .. "\n"
end

function M.inspect_json(summary, result)
  local anchors = {}
  for i, a in ipairs(result.anchors) do
    local changes = {}
    for k, c in ipairs(a.changes) do
      changes[k] = { kind = c.kind, path = escape(full(a.path, c.path)), mode = c.mode, size = c.size }
    end
    anchors[i] = { path = escape(a.path), total = a.total, incomplete = a.incomplete, changes = changes }
  end
  return json.encode({
    domain_id = summary.domain_id, profile = escape(summary.profile), workspace = escape(summary.workspace),
    artifact = result.artifact or json.null, anchors = anchors,
    egress = result.egress and { allowed = result.egress.allowed, refused = result.egress.refused } or json.null,
  }) .. "\n"
end

function M.verify_text(summary, rows)
  local out = { "Domain " .. summary.domain_id, "  profile    " .. shown(summary.profile),
    "  workspace  " .. shown(summary.workspace) }
  local failed = 0
  for _, r in ipairs(rows) do
    if not r.ok then failed = failed + 1 end
    out[#out + 1] = string_format("  %-4s %-13s %s", r.ok and "ok" or "FAIL", r.check, escape(r.detail))
  end
  out[#out + 1] = failed == 0 and "verified: no problem found"
    or string_format("verified: %d problem%s", failed, failed == 1 and "" or "s")
  return table_concat(out, "\n") .. "\n"
end

function M.verify_json(summary, rows)
  local checks = {}
  for i, r in ipairs(rows) do
    checks[i] = { check = r.check, ok = r.ok, detail = escape(r.detail) }
  end
  return json.encode({ domain_id = summary.domain_id, profile = escape(summary.profile),
    workspace = escape(summary.workspace), checks = checks }) .. "\n"
end

-- What a removal will delete, shown before the question (DX-6).
function M.remove_scope(id, identity)
  if identity.interrupted then
    return table_concat({
      "Domain removal",
      "  Domain     " .. id,
      "  an earlier removal of it was interrupted: what it set aside (domains/.rm-" .. id .. ")",
      "  and its runtime directory are deleted; nothing else.",
    }, "\n") .. "\n"
  end
  if identity.never_launched then
    return table_concat({
      "Domain removal",
      "  Domain     " .. id,
      "  never launched: its directory is empty (`config check --profile` or `state inspect`",
      "  made it); removing it deletes nothing else.",
    }, "\n") .. "\n"
  end
  return table_concat({
    "Domain removal",
    "  Domain     " .. id,
    "  profile    " .. shown(identity.profile),
    "  workspace  " .. shown(identity.workspace) .. "  (gone)",
    "  deletes everything Lazaret kept for it: its State Anchors, its Ignored Workspace State",
    "  and its Domain Store. Prepared images stay (`lazaret image gc` reclaims them).",
  }, "\n") .. "\n"
end

-- What a reset will discard, shown before the question (DX-6).
function M.reset_scope(summary, paths)
  local out = {
    "State Anchor reset",
    "  Domain     " .. summary.domain_id,
    "  profile    " .. shown(summary.profile),
    "  workspace  " .. shown(summary.workspace),
  }
  if #paths == 0 then
    out[#out + 1] = "  nothing to reset: none of these persistent directories has kept state"
  else
    out[#out + 1] = "  discards what the sandbox kept in:"
    for _, p in ipairs(paths) do
      out[#out + 1] = "    " .. shown(p)
    end
    out[#out + 1] = "  The next launch sees the image's own content there again. The workspace, the"
    out[#out + 1] = "  Ignored Workspace State and other persistent directories are not touched."
  end
  return table_concat(out, "\n") .. "\n"
end

return M
