-- Command-line grammar (docs/cli.md). Pure: parse(argv) returns a command
-- table or nil plus a usage message; it never touches the system.
--
--   lazaret [options] <profile> [-- command args...]
--   lazaret run --profile <profile> [options] [-- command args...]
--   lazaret config check [--profile P] [--workspace DIR] [--config FILE] [--json]
--   lazaret diag [--json | --report FILE.lua]
--   lazaret image prepare IMAGE | list [--json] | gc [--dry-run]  [--config FILE]
--   lazaret qualify [--json] [--profile P] [--config FILE] [SUITE.lua ...]
--   lazaret init [--agent NAME] [--config FILE]
--   lazaret --help | --version
--   lazaret state list [--json] [--no-sizes] | inspect --profile P [DIR...] [--json]
--     | reset --profile P (--all | DIR...) [--yes]
-- A profile named like a command is launched with the explicit
-- `run --profile` form.
local M = {}

local ipairs, type, table_concat, table_move = ipairs, type, table.concat, table.move
local agents = require("lazaret.config.agents")

M.commands = { run = true, config = true, diag = true, state = true, help = true, image = true,
  init = true, qualify = true }

-- Options each command accepts: name -> true when it takes a value.
local options = {
  launch = { config = true, workspace = true, help = false },
  run = { profile = true, config = true, workspace = true, help = false },
  check = { profile = true, config = true, workspace = true, json = false, help = false },
  diag = { json = false, report = true, help = false },
  config = { help = false },
  state = { help = false },
  ["state list"] = { config = true, json = false, ["no-sizes"] = false, help = false },
  ["state inspect"] = { config = true, profile = true, workspace = true, json = false, max = true,
    help = false },
  ["state verify"] = { config = true, profile = true, workspace = true, json = false, help = false },
  ["state rm"] = { config = true, yes = false, help = false },
  ["state reset"] = { config = true, profile = true, workspace = true, all = false, yes = false,
    help = false },
  image = { help = false },
  ["image prepare"] = { config = true, help = false },
  ["image list"] = { config = true, json = false, help = false },
  ["image gc"] = { config = true, ["dry-run"] = false, help = false },
  ["image build-default"] = { config = true, help = false },
  init = { config = true, agent = true, help = false },
  qualify = { profile = true, config = true, json = false, help = false },
  __hc = { config = true, profile = true, workspace = true, ["expect-domain"] = true,
    ["expect-fingerprint"] = true },
}

-- Parses argv[first..] into opts and positionals; stops at "--".
local function scan(argv, first, allowed)
  local opts, positional = {}, {}
  local i = first
  while i <= #argv do
    local a = argv[i]
    if a == "--" then
      local rest = table_move(argv, i + 1, #argv, 1, {})
      return opts, positional, rest
    elseif a:sub(1, 2) == "--" then
      local name, value = a:match("^%-%-([%w-]+)=(.*)$")
      name = name or a:sub(3)
      local takes = allowed[name]
      if takes == nil then
        return nil, "unknown option '--" .. name .. "'"
      end
      if opts[name] ~= nil then
        return nil, "option '--" .. name .. "' given twice"
      end
      if takes then
        if value == nil then
          i = i + 1
          value = argv[i]
          if value == nil then
            return nil, "option '--" .. name .. "' needs a value"
          end
        end
        if value == "" then
          return nil, "option '--" .. name .. "' needs a non-empty value"
        end
        opts[name] = value
      else
        if value ~= nil then
          return nil, "option '--" .. name .. "' takes no value"
        end
        opts[name] = true
      end
    elseif a == "-h" and allowed.help ~= nil then
      opts.help = true
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      return nil, "unknown option '" .. a .. "'"
    else
      positional[#positional + 1] = a
    end
    i = i + 1
  end
  return opts, positional, nil
end

local function launch(opts, profile, command)
  if command and #command == 0 then
    return nil, "'--' must be followed by a command"
  end
  return {
    action = "launch",
    profile = profile,
    config = opts.config,
    workspace = opts.workspace,
    argv = command, -- nil: interactive /bin/bash (DX-1)
  }
end

function M.parse(argv)
  local first = argv[1]
  if first == nil then
    return nil, "missing profile or command"
  end
  if first == "--help" or first == "-h" or first == "help" then
    return { action = "help", topic = argv[2] or "main" }
  end
  if first == "--version" then
    if argv[2] ~= nil then
      return nil, "--version takes no arguments"
    end
    return { action = "version" }
  end

  if first == "run" then
    local opts, pos, rest = scan(argv, 2, options.run)
    if not opts then return nil, pos end
    if opts.help then return { action = "help", topic = "run" } end
    if #pos > 0 then
      return nil, "unexpected argument '" .. pos[1] .. "' (use -- before a command)"
    end
    if not opts.profile then
      return nil, "run needs --profile <profile>"
    end
    return launch(opts, opts.profile, rest)
  elseif first == "config" then
    if argv[2] == "check" then
      local opts, pos, rest = scan(argv, 3, options.check)
      if not opts then return nil, pos end
      if opts.help then return { action = "help", topic = "config check" } end
      if #pos > 0 or rest then
        return nil, "config check takes no arguments"
      end
      return {
        action = "config-check",
        profile = opts.profile,
        config = opts.config,
        workspace = opts.workspace,
        json = opts.json == true,
      }
    end
    local opts, pos = scan(argv, 2, options.config)
    if not opts then return nil, pos end
    if opts.help and #pos == 0 then return { action = "help", topic = "config" } end
    return nil, "unknown config command '" .. (argv[2] or "") .. "' (expected: check)"
  elseif first == "diag" then
    local opts, pos, rest = scan(argv, 2, options.diag)
    if not opts then return nil, pos end
    if opts.help then return { action = "help", topic = "diag" } end
    if #pos > 0 or rest then
      return nil, "diag takes no arguments"
    end
    if opts.json and opts.report then
      return nil, "diag: --json and --report exclude each other (a report writes its own output)"
    end
    return { action = "diag", json = opts.json == true, report = opts.report }
  elseif first == "image" then
    local sub = argv[2]
    local allowed = options["image " .. tostring(sub)]
    if not allowed then
      local opts = scan(argv, 2, options.image)
      if opts and opts.help then return { action = "help", topic = "image" } end
      return nil, "unknown image command '" .. tostring(sub or "")
        .. "' (expected: prepare, list, gc, build-default)"
    end
    local opts, pos, rest = scan(argv, 3, allowed)
    if not opts then return nil, pos end
    if opts.help then return { action = "help", topic = "image " .. sub } end
    if rest then return nil, "image " .. sub .. " takes no command after --" end
    if sub == "prepare" then
      if #pos ~= 1 then return nil, "image prepare needs exactly one IMAGE" end
      return { action = "image-prepare", image = pos[1], config = opts.config }
    end
    if #pos > 0 then return nil, "image " .. sub .. " takes no arguments" end
    if sub == "build-default" then
      return { action = "image-build-default", config = opts.config }
    end
    if sub == "list" then
      return { action = "image-list", json = opts.json == true, config = opts.config }
    end
    return { action = "image-gc", dry_run = opts["dry-run"] == true, config = opts.config }
  elseif first == "__hc" then
    -- Internal: the Host Coordinator a CLI starts (lua/lazaret/hc.lua).
    local opts, pos, rest = scan(argv, 2, options.__hc)
    if not opts then return nil, pos end
    if #pos > 0 or rest or not (opts.config and opts.profile and opts.workspace
      and opts["expect-domain"] and opts["expect-fingerprint"]) then
      return nil, "__hc is internal"
    end
    return { action = "hc", config = opts.config, profile = opts.profile,
      workspace = opts.workspace, expect_domain = opts["expect-domain"],
      expect_fingerprint = opts["expect-fingerprint"] }
  elseif first == "qualify" then
    local opts, pos, rest = scan(argv, 2, options.qualify)
    if not opts then return nil, pos end
    if opts.help then return { action = "help", topic = "qualify" } end
    if rest then return nil, "qualify takes suite files, not a command after --" end
    return { action = "qualify", json = opts.json == true, profile = opts.profile,
      config = opts.config, suites = pos }
  elseif first == "init" then
    local opts, pos, rest = scan(argv, 2, options.init)
    if not opts then return nil, pos end
    if opts.help then return { action = "help", topic = "init" } end
    if #pos > 0 or rest then return nil, "init takes no arguments" end
    if opts.agent then
      local ok, msg = agents.get(opts.agent)
      if not ok then return nil, "init --agent: " .. msg end
    end
    return { action = "init", config = opts.config, agent = opts.agent }
  elseif first == "state" then
    local sub = argv[2]
    local allowed = options["state " .. tostring(sub)]
    if not allowed then
      local opts = scan(argv, 2, options.state)
      if opts and opts.help then return { action = "help", topic = "state" } end
      return nil, "unknown state command '" .. tostring(sub or "") .. "' (expected: list, inspect, verify, reset, rm)"
    end
    local opts, pos, rest = scan(argv, 3, allowed)
    if not opts then return nil, pos end
    if opts.help then return { action = "help", topic = "state " .. sub } end
    if rest then return nil, "state " .. sub .. " takes no command after --" end
    if sub == "list" then
      if #pos > 0 then return nil, "state list takes no arguments" end
      return { action = "state-list", json = opts.json == true, no_sizes = opts["no-sizes"] == true,
        config = opts.config }
    end
    if sub == "rm" then
      if #pos ~= 1 then return nil, "state rm needs exactly one DOMAIN-ID (`lazaret state list` shows them)" end
      return { action = "state-rm", id = pos[1], yes = opts.yes == true, config = opts.config }
    end
    if not opts.profile then
      return nil, "state " .. sub .. " needs --profile: the Domain is that profile in the workspace"
    end
    -- as many as the bindings take (l_state.c, l_coordinator.c)
    if #pos > 64 then
      return nil, "state " .. sub .. " takes at most 64 persistent directories"
    end
    if sub == "verify" then
      if #pos > 0 then return nil, "state verify takes no arguments" end
      return { action = "state-verify", profile = opts.profile, workspace = opts.workspace,
        config = opts.config, json = opts.json == true }
    end
    if sub == "inspect" then
      local max = 200
      if opts.max then
        max = tonumber(opts.max)
        if not max or math.type(max) ~= "integer" or max < 0 or max > 100000 then
          return nil, "state inspect: --max takes a whole number from 0 to 100000"
        end
      end
      return { action = "state-inspect", profile = opts.profile, workspace = opts.workspace,
        config = opts.config, json = opts.json == true, max = max, paths = pos }
    end
    if opts.all and #pos > 0 then
      return nil, "state reset: --all or persistent directories, not both"
    end
    if not opts.all and #pos == 0 then
      return nil, "state reset needs the persistent directories to reset, or --all"
    end
    return { action = "state-reset", profile = opts.profile, workspace = opts.workspace,
      config = opts.config, all = opts.all == true, yes = opts.yes == true, paths = pos }
  end

  -- lazaret [options] <profile> [-- command...]
  local opts, pos, rest = scan(argv, 1, options.launch)
  if not opts then return nil, pos end
  if opts.help then return { action = "help", topic = "main" } end
  if #pos == 0 then
    return nil, "missing profile"
  end
  if #pos > 1 then
    return nil, "unexpected argument '" .. pos[2] .. "' (put the command after --)"
  end
  if M.commands[pos[1]] then
    return nil, "'" .. pos[1] .. "' is a command; to launch a profile of that name use "
      .. "'lazaret run --profile " .. pos[1] .. "'"
  end
  return launch(opts, pos[1], rest)
end

M.help = {
  main = table_concat({
    "Usage: lazaret [--config FILE] [--workspace DIR] <profile> [-- command [args...]]",
    "       lazaret run --profile <profile> [--config FILE] [--workspace DIR] [-- command...]",
    "       lazaret config check [--profile P] [--workspace DIR] [--config FILE] [--json]",
    "       lazaret diag [--json | --report FILE.lua]",
    "       lazaret qualify [--json] [--profile P] [--config FILE] [SUITE.lua ...]",
    "       lazaret image prepare IMAGE | list [--json] | gc [--dry-run] | build-default",
    "       lazaret init [--agent NAME] [--config FILE]",
    "       lazaret state list | inspect | verify | rm | reset  (lazaret state --help)",
    "       lazaret --help | --version",
    "",
    "Opens /bin/bash (or the command after --) in the profile's rootless gVisor sandbox,",
    "with the workspace (default: the current directory) at /workspace.",
    "",
    "Commands:",
    "  run      launch a profile by explicit name (same as the first form)",
    "  config   check the trusted configuration",
    "  diag     report whether this host is ready to run sandboxes",
    "  image    prepare, list and reclaim sandbox base images",
    "  init     write a first configuration using the default image (--agent NAME:",
    "           a profile for a coding agent)",
    "  qualify  launch real sandboxes to check this host end to end",
    "  state    list, inspect, verify, reset or remove what the sandboxes kept",
    "",
    "Options:",
    "  --config FILE     configuration file (default: $XDG_CONFIG_HOME/lazaret/config.toml,",
    "                    or ~/.config/lazaret/config.toml when XDG_CONFIG_HOME is unset,",
    "                    empty or relative)",
    "  --workspace DIR   project directory mounted at /workspace (default: .)",
    "  -h, --help        show help",
    "  --version         show the version",
    "",
    "Exit status: the command's status when launched; 64 usage error, 69 unavailable,",
    "70 internal error, 77 run as root, 78 configuration refused. See docs/cli.md.",
  }, "\n"),
  run = table_concat({
    "Usage: lazaret run --profile <profile> [--config FILE] [--workspace DIR] [-- command [args...]]",
    "",
    "Launches <profile> like 'lazaret <profile>'; use it for profiles named like a command.",
  }, "\n"),
  config = table_concat({
    "Usage: lazaret config check [--profile P] [--workspace DIR] [--config FILE] [--json]",
    "",
    "Commands:",
    "  check    validate the configuration and print where Lazaret keeps its state",
  }, "\n"),
  ["config check"] = table_concat({
    "Usage: lazaret config check [--profile P] [--workspace DIR] [--config FILE] [--json]",
    "",
    "Validates the configuration source (permissions, ownership, strict v1 syntax and",
    "schema). With --profile it also resolves that profile for the workspace and prints",
    "the Domain ID and the Configuration Fingerprint. Environment values never appear.",
    "Exit status: 0 valid, 78 refused, 64 usage error, 69 platform unsupported.",
  }, "\n"),
  diag = table_concat({
    "Usage: lazaret diag [--json | --report FILE.lua]",
    "",
    "Reports host readiness: kernel, subordinate IDs, newuidmap/newgidmap, runsc,",
    "slirp4netns, /dev/fuse, /dev/net/tun and user namespaces, with what to do about",
    "each problem. Exit status: 0 when every check passes, 1 otherwise.",
    "",
    "  --json              one JSON object instead of text",
    "  --report FILE.lua   run your own report over the same facts, in a restricted",
    "                      Lua environment (docs/reports.md); exit status: 0 when it",
    "                      returns true or nothing, 1 when it returns false, 65 when",
    "                      it fails while running, 66 when FILE.lua cannot be read or",
    "                      is not Lua source text",
  }, "\n"),
  image = table_concat({
    "Usage: lazaret image prepare IMAGE [--config FILE]",
    "       lazaret image list [--json] [--config FILE]",
    "       lazaret image gc [--dry-run] [--config FILE]",
    "       lazaret image build-default [--config FILE]",
    "",
    "IMAGE is oci:PATH[:TAG], docker-archive:PATH or docker://REF.",
  }, "\n"),
  ["image prepare"] = table_concat({
    "Usage: lazaret image prepare IMAGE [--config FILE]",
    "",
    "Verifies IMAGE (oci:PATH[:TAG], docker-archive:PATH or docker://REF) and",
    "materialises it as an immutable prepared lower under the Storage Root, inside",
    "your user namespace. Preparing an image already prepared only records the",
    "reference given, so launches by it find the image.",
  }, "\n"),
  ["image build-default"] = table_concat({
    "Usage: lazaret image build-default [--config FILE]",
    "",
    "Builds the default Debian 12 image with mmdebstrap (as you, in a user namespace;",
    "needs Debian's package registry), stores it under the Storage Root as",
    "images/default and prepares it.",
  }, "\n"),
  qualify = table_concat({
    "Usage: lazaret qualify [--json] [--profile P] [--config FILE] [SUITE.lua ...]",
    "",
    "Qualifies this host: the diag checks, then real launches of profile P (default:",
    "'default') in a scratch workspace under ~/.cache/lazaret: the runsc launch path,",
    "the workspace filesystem, the rootless network, Git Sentry and the terminal.",
    "Each SUITE.lua adds your own checks (docs/qualify.md). Exit status: 0 when no",
    "check failed, 1 otherwise, 66 when a suite file is refused.",
  }, "\n"),
  init = table_concat({
    "Usage: lazaret init [--agent NAME] [--config FILE]",
    "",
    "Writes a first configuration (default: $XDG_CONFIG_HOME/lazaret/config.toml, or",
    "~/.config/lazaret/config.toml) with a profile 'default' that uses the default",
    "image. Never replaces a file.",
    "",
    "  --agent NAME   instead, one profile NAME for a coding agent ("
      .. table_concat(agents.names(), ", ") .. "):",
    "                 the default image, how to install the agent inside, its",
    "                 API key variable by name (commented out), the directories",
    "                 it keeps, and network.allow_domains for its hosts",
    "                 (docs/agents.md)",
  }, "\n"),
  ["image list"] = table_concat({
    "Usage: lazaret image list [--json] [--config FILE]",
    "",
    "Lists prepared images: artifact ID, state, size, leases and source.",
  }, "\n"),
  ["image gc"] = table_concat({
    "Usage: lazaret image gc [--dry-run] [--config FILE]",
    "",
    "Reclaims prepared images that no Domain leases and abandoned preparations.",
    "Trees the catalog does not know are kept and reported.",
  }, "\n"),
  state = table_concat({
    "Usage: lazaret state list [--json] [--no-sizes] [--config FILE]",
    "       lazaret state inspect --profile P [DIR...] [--workspace DIR] [--json] [--max N]",
    "       lazaret state verify --profile P [--workspace DIR] [--json]",
    "       lazaret state rm DOMAIN-ID [--yes]",
    "       lazaret state reset --profile P (--all | DIR...) [--workspace DIR] [--yes]",
    "       (each also takes --config FILE)",
    "",
    "What the sandboxes kept (State Anchors, Ignored Workspace State), and resetting it.",
  }, "\n"),
  ["state list"] = table_concat({
    "Usage: lazaret state list [--json] [--no-sizes] [--config FILE]",
    "",
    "Lists the Domains under the Storage Root: profile, workspace, whether one is in use,",
    "when it was last used, its image leases and the size of each persistent directory's",
    "kept state and of its Ignored Workspace State. Reads no file contents.",
  }, "\n"),
  ["state inspect"] = table_concat({
    "Usage: lazaret state inspect --profile P [DIR...] [--workspace DIR] [--json] [--max N] [--config FILE]",
    "",
    "Lists what the sandbox changed in the persistent directories (all, or the DIRs named)",
    "of the Domain of profile P in the workspace, compared with the profile's prepared",
    "image: added, changed, deleted and opaque entries, with sizes. No file contents.",
    "At most N entries per directory (default 200).",
  }, "\n"),
  ["state verify"] = table_concat({
    "Usage: lazaret state verify --profile P [--workspace DIR] [--json] [--config FILE]",
    "",
    "Checks the structure of the Domain of profile P in the workspace while holding it",
    "(refused while it is in use): its identity, its Domain Store, its leases, its State",
    "Anchors and Ignored Workspace State. Repairs only what recovery repairs (a crashed",
    "generation recorded failed, leases of dead processes released). Exit status 1 on a",
    "problem.",
  }, "\n"),
  ["state rm"] = table_concat({
    "Usage: lazaret state rm DOMAIN-ID [--yes] [--config FILE]",
    "",
    "Removes a Domain whose workspace is gone (`lazaret state list` marks it): its State",
    "Anchors, Ignored Workspace State, Domain Store and runtime directory. Refused while",
    "it is in use or holds an image lease. Shows the Domain, then asks; --yes answers the",
    "question, nothing else.",
  }, "\n"),
  ["state reset"] = table_concat({
    "Usage: lazaret state reset --profile P (--all | DIR...) [--workspace DIR] [--yes] [--config FILE]",
    "",
    "Discards what the sandbox kept in the named persistent directories (or all of them)",
    "of the Domain of profile P in the workspace, so the next launch sees the image's",
    "content there again. Refused while the Domain is in use. Shows the Domain and the",
    "exact scope, then asks; --yes answers the question, nothing else.",
  }, "\n"),
}

function M.help_text(topic)
  return M.help[topic] or M.help.main
end

return M
