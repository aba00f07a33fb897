-- The coding agents `lazaret init --agent NAME` knows (issue 18, "agents at
-- home"; docs/agents.md). One table per agent holds every fact the generated
-- configuration and the documentation state: the npm package and how it is
-- installed inside the sandbox, the host variables it reads (by name only),
-- where it keeps its state, and the names it talks to, each with its reason.
-- Pure: render() turns a table and the default image reference into the text
-- of a configuration file; nothing here touches the system.
--
-- Invariant: the text never holds a variable's value. `env` entries map a
-- sandbox name to a host variable's name, and they are written commented out,
-- because the loader refuses to launch a profile while a host variable it
-- names is unset (docs/configuration.md, `env`), and both agents can also log
-- in interactively.
local M = {}

local assert, error, ipairs, pairs, tostring, type = assert, error, ipairs, pairs, tostring, type
local math_max, string_format, string_rep = math.max, string.format, string.rep
local table_concat, table_sort = table.concat, table.sort

-- The default image has no Node.js; Debian 12's packages provide it.
local NODE_INSTALL = "apt-get update && apt-get install -y nodejs npm"

-- The default persistent_dirs (docs/configuration.md, "Profile keys").
local DEFAULT_PERSISTENT_DIRS = { "/root", "/usr", "/var", "/etc", "/opt" }
M.DEFAULT_PERSISTENT_DIRS = DEFAULT_PERSISTENT_DIRS

-- Tried versions: docs/agents.md, "What was tried".
M.agents = {
  claude = {
    title = "Claude Code",
    command = "claude",
    package = "@anthropic-ai/claude-code",
    tried = { version = "2.1.332", date = "2026-12-01" },
    install = { NODE_INSTALL, "npm install -g @anthropic-ai/claude-code" },
    env = {
      { name = "ANTHROPIC_API_KEY",
        why = "an Anthropic Console API key" },
    },
    login = "`/login` in `claude` prints a URL to open in your browser and asks for the code it shows",
    state = {
      { path = "/usr/local", why = "npm's global installs: the claude command" },
      { path = "/root/.claude", why = "login, settings, sessions" },
      { path = "/root/.claude.json", why = "account and project settings" },
    },
    domains = {
      { name = "api.anthropic.com", why = "the Claude API; a login also creates its key here" },
      { name = "platform.claude.com", why = "login: the code you paste is exchanged for a token" },
      { name = "claude.ai", why = "features of a Claude subscription login" },
      { name = "registry.npmjs.org", why = "npm: installing and updating Claude Code" },
      { name = "deb.debian.org", why = "apt: Node.js and npm, which the default image lacks" },
      { name = "security.debian.org", why = "apt: security updates (the image names it)" },
    },
    left_out = {
      { name = "o1158394.ingest.us.sentry.io", why = "error reports" },
      { name = "browser-intake-us5-datadoghq.com", why = "usage telemetry" },
    },
  },
  codex = {
    title = "Codex CLI",
    command = "codex",
    package = "@openai/codex",
    tried = { version = "0.171.0", date = "2026-12-01" },
    install = { NODE_INSTALL, "npm install -g @openai/codex" },
    env = {
      { name = "OPENAI_API_KEY",
        why = "an OpenAI Platform API key" },
    },
    login = "`codex login --device-auth` prints a URL and a code to enter in your browser",
    state = {
      { path = "/usr/local", why = "npm's global installs: the codex command" },
      { path = "/root/.codex", why = "login (auth.json), config.toml, sessions" },
    },
    domains = {
      { name = "api.openai.com", why = "the OpenAI API, with an API key" },
      { name = "chatgpt.com", why = "the models, with a ChatGPT login" },
      { name = "auth.openai.com", why = "login and token refresh" },
      { name = "registry.npmjs.org", why = "npm: installing and updating Codex" },
      { name = "deb.debian.org", why = "apt: Node.js and npm, which the default image lacks" },
      { name = "security.debian.org", why = "apt: security updates (the image names it)" },
    },
    left_out = {
      { name = "ab.chatgpt.com", why = "usage metrics" },
    },
  },
}

-- The known names, sorted: for messages and documentation.
function M.names()
  local names = {}
  for name in pairs(M.agents) do names[#names + 1] = name end
  table_sort(names)
  return names
end

-- get(name) -> agent table | nil, msg listing the known names.
function M.get(name)
  local agent = type(name) == "string" and M.agents[name]
  if agent then return agent end
  return nil, "unknown agent '" .. tostring(name) .. "' (known: "
    .. table_concat(M.names(), ", ") .. ")"
end

-- A TOML basic string.
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' or c == "\\" then return "\\" .. c end
    return string_format("\\u%04X", c:byte())
  end) .. '"'
end
M.quote = quote

local function covered(path)
  for _, dir in ipairs(DEFAULT_PERSISTENT_DIRS) do
    if path == dir or path:sub(1, #dir + 1) == dir .. "/" then return true end
  end
  return false
end

-- Lines `  "name",  # why` with the comments aligned; prefix comments a line out.
local function domain_lines(out, list, prefix)
  local width = 0
  for _, d in ipairs(list) do
    width = math_max(width, #quote(d.name) + 1)
  end
  for _, d in ipairs(list) do
    local item = quote(d.name) .. ","
    out[#out + 1] = "  " .. prefix .. item .. string_rep(" ", width - #item + 1) .. "# " .. d.why
  end
end

-- Appends text as "# " comment lines of at most 78 columns.
local function paragraph(out, text)
  local line = "#"
  for word in text:gmatch("%S+") do
    if #line + 1 + #word > 78 and line ~= "#" then
      out[#out + 1] = line
      line = "#"
    end
    line = line .. " " .. word
  end
  out[#out + 1] = line
end

-- Lines "#   <path>  <why>" with the reasons aligned.
local function state_lines(out, list)
  local width = 0
  for _, s in ipairs(list) do width = math_max(width, #s.path) end
  for _, s in ipairs(list) do
    out[#out + 1] = "#   " .. s.path .. string_rep(" ", width - #s.path + 2) .. s.why
  end
end

-- render(name, image) -> the configuration text for agent `name` whose
-- profile uses `image` (the reference plain `init` writes). Raises on an
-- unknown name: the CLI checked it first.
function M.render(name, image)
  local a = assert(M.agents[name], "unknown agent")
  if type(image) ~= "string" then error("image must be a string", 2) end
  local p = "profiles." .. name
  local out = {
    "# Lazaret configuration, v1 (docs/configuration.md).",
    "# Written by `lazaret init --agent " .. name .. "`: a profile for " .. a.title .. ".",
    "# docs/agents.md explains each line. No secret is written here.",
    "version = 1",
    "",
    "# `lazaret " .. name .. "` opens a shell in the sandbox with the current directory at",
    "# /workspace; `lazaret " .. name .. " -- " .. a.command .. "` starts the agent directly.",
    "[" .. p .. "]",
    "# The default Debian 12 image; `lazaret image build-default` builds it.",
    "image = " .. quote(image),
    "# Install " .. a.title .. " once, inside the sandbox (" .. a.tried.version
      .. " was tried):",
  }
  for _, cmd in ipairs(a.install) do out[#out + 1] = "#   " .. cmd end

  local extra = {}
  for _, s in ipairs(a.state) do
    if not covered(s.path) then extra[#extra + 1] = s.path end
  end
  local dirs = {}
  for _, d in ipairs(DEFAULT_PERSISTENT_DIRS) do dirs[#dirs + 1] = quote(d) end
  if #extra == 0 then
    out[#out + 1] = "# Its state persists across launches: the default persistent_dirs"
    out[#out + 1] = "# [" .. table_concat(dirs, ", ") .. "] hold"
  else
    for _, d in ipairs(extra) do dirs[#dirs + 1] = quote(d) end
    out[#out + 1] = "# Its state persists across launches in these directories, which hold"
  end
  state_lines(out, a.state)
  if #extra > 0 then
    out[#out + 1] = "persistent_dirs = [" .. table_concat(dirs, ", ") .. "]"
  end

  out[#out + 1] = ""
  local names = {}
  for _, e in ipairs(a.env) do names[#names + 1] = e.name .. " (" .. e.why .. ")" end
  paragraph(out, "Passed from the host by name, never by value: "
    .. table_concat(names, "; ") .. ". Commented out because Lazaret refuses to launch "
    .. "a profile while a host variable its env names is unset; without it, log in "
    .. "inside instead: " .. a.login .. ". To pass it, uncomment both lines.")
  out[#out + 1] = "# [" .. p .. ".env]"
  for _, e in ipairs(a.env) do out[#out + 1] = "# " .. e.name .. " = " .. quote(e.name) end

  out[#out + 1] = ""
  out[#out + 1] = "# Outgoing connections only to these names, through the HTTP proxy the sandbox"
  out[#out + 1] = "# finds in HTTP_PROXY and HTTPS_PROXY (docs/configuration.md, \"Egress by name\")."
  out[#out + 1] = "[" .. p .. ".network]"
  out[#out + 1] = "allow_domains = ["
  domain_lines(out, a.domains, "")
  if a.left_out and #a.left_out > 0 then
    out[#out + 1] = "  # Left out on purpose; uncomment to allow:"
    domain_lines(out, a.left_out, "# ")
  end
  out[#out + 1] = "]"
  return table_concat(out, "\n") .. "\n"
end

-- next_steps(name) -> what to do after the file is written, one step a line.
function M.next_steps(name)
  local a = assert(M.agents[name], "unknown agent")
  local env = {}
  for _, e in ipairs(a.env) do env[#env + 1] = e.name end
  local out = {
    "next: lazaret image build-default (once), then lazaret " .. name .. "; inside it install "
      .. a.title .. ":",
  }
  for _, cmd in ipairs(a.install) do out[#out + 1] = "  " .. cmd end
  out[#out + 1] = "then run " .. a.command .. " and log in there, or set "
    .. table_concat(env, ", ") .. " on the host and uncomment the profile's env table"
  return table_concat(out, "\n") .. "\n"
end

return M
