-- lazaret.cli: the command-line grammar (docs/cli.md).
local cli = require("lazaret.cli")

describe("lazaret.cli", function()
  local function parse(...)
    return cli.parse({ ... })
  end

  it("launches a profile interactively when no command is given", function()
    local cmd = assert(parse("dev"))
    assert.same({ action = "launch", profile = "dev" }, cmd)
  end)

  it("passes the exact argument vector after --", function()
    local cmd = assert(parse("dev", "--", "ls", "-l", "--", "--config", "x y"))
    assert.equal("launch", cmd.action)
    assert.same({ "ls", "-l", "--", "--config", "x y" }, cmd.argv)
  end)

  it("accepts host options before and after the profile, with = or a separate value", function()
    local cmd = assert(parse("--config", "/c.toml", "dev", "--workspace=/w"))
    assert.equal("/c.toml", cmd.config)
    assert.equal("/w", cmd.workspace)
    assert.equal("dev", cmd.profile)
  end)

  it("treats run --profile as the same launch", function()
    local a = assert(parse("run", "--profile", "dev", "--", "true"))
    local b = assert(parse("dev", "--", "true"))
    assert.same(b, a)
  end)

  it("launches a profile named like a command only through run --profile", function()
    local cmd, msg = parse("state")
    assert.is_nil(cmd)
    assert.matches("unknown state command", msg)
    cmd, msg = parse("--config", "/c", "diag")
    assert.is_nil(cmd)
    assert.matches("run %-%-profile diag", msg)
    cmd = assert(parse("run", "--profile", "state"))
    assert.equal("launch", cmd.action)
    assert.equal("state", cmd.profile)
  end)

  it("refuses unknown options, missing values, repeats and stray arguments", function()
    local cases = {
      { { "dev", "--bogus" }, "unknown option '%-%-bogus'" },
      { { "dev", "-x" }, "unknown option '%-x'" },
      { { "dev", "--config" }, "needs a value" },
      { { "dev", "--config=" }, "non%-empty" },
      { { "dev", "--config", "a", "--config", "b" }, "given twice" },
      { { "dev", "extra" }, "unexpected argument 'extra'" },
      { { "dev", "--" }, "must be followed by a command" },
      { { "run" }, "needs %-%-profile" },
      { { "run", "--profile", "dev", "x" }, "unexpected argument" },
      { { "config" }, "unknown config command" },
      { { "config", "lint" }, "unknown config command 'lint'" },
      { { "config", "check", "x" }, "takes no arguments" },
      { { "diag", "--json=1" }, "takes no value" },
      { { "diag", "--report" }, "needs a value" },
      { { "diag", "--report", "" }, "needs a non%-empty value" },
      { { "diag", "--report", "r.lua", "--json" }, "exclude each other" },
      { { "diag", "--report", "a.lua", "--report", "b.lua" }, "given twice" },
      { { "--version", "x" }, "takes no arguments" },
      { {}, "missing profile" },
      { { "--workspace", "/w" }, "missing profile" },
    }
    for _, case in ipairs(cases) do
      local cmd, msg = cli.parse(case[1])
      assert.is_nil(cmd, table.concat(case[1], " "))
      assert.matches(case[2], msg)
    end
  end)

  it("parses diag --report FILE", function()
    assert.are.same({ action = "diag", json = false, report = "r.lua" }, cli.parse({ "diag", "--report", "r.lua" }))
    assert.are.same({ action = "diag", json = false, report = "/x/r.lua" }, cli.parse({ "diag", "--report=/x/r.lua" }))
    assert.are.same({ action = "diag", json = true }, cli.parse({ "diag", "--json" }))
    assert.matches("%-%-report FILE%.lua", cli.help_text("diag"))
    assert.matches("66", cli.help_text("diag"))
  end)

  it("parses config check options", function()
    local cmd = assert(parse("config", "check", "--json", "--profile", "dev", "--config", "/c"))
    assert.same({ action = "config-check", profile = "dev", config = "/c", json = true }, cmd)
  end)

  it("routes --help for every command to its own text", function()
    assert.equal("main", parse("--help").topic)
    assert.equal("main", parse("dev", "--help").topic)
    assert.equal("run", parse("run", "--help").topic)
    assert.equal("config", parse("config", "--help").topic)
    assert.equal("config check", parse("config", "check", "--help").topic)
    assert.equal("diag", parse("diag", "-h").topic)
    assert.equal("state", parse("state", "--help").topic)
    for _, topic in ipairs({ "main", "run", "config", "config check", "diag", "state", "state list",
      "state inspect", "state verify", "state rm", "state reset" }) do
      assert.matches("^Usage: lazaret", cli.help_text(topic))
    end
  end)

  describe("state", function()
    it("parses list and reset", function()
      assert.same({ action = "state-list", json = true, no_sizes = false, config = "/c" },
        parse("state", "list", "--json", "--config", "/c"))
      assert.same({ action = "state-list", json = false, no_sizes = true },
        parse("state", "list", "--no-sizes"))
      assert.same({ action = "state-reset", profile = "dev", all = true, yes = false, paths = {} },
        parse("state", "reset", "--profile", "dev", "--all"))
      assert.same({ action = "state-reset", profile = "dev", workspace = "/w", all = false, yes = true,
        paths = { "/usr", "/etc" } },
        parse("state", "reset", "--profile", "dev", "--workspace", "/w", "/usr", "/etc", "--yes"))
      assert.same({ action = "state-inspect", profile = "dev", json = true, max = 5, paths = { "/usr" } },
        parse("state", "inspect", "--profile", "dev", "/usr", "--json", "--max", "5"))
      assert.equal(200, parse("state", "inspect", "--profile", "dev").max)
      local cmd, msg = parse("state", "inspect", "--profile", "dev", "--max", "x")
      assert.is_nil(cmd)
      assert.matches("whole number", msg)
      assert.same({ action = "state-rm", id = "ab", yes = true }, parse("state", "rm", "ab", "--yes"))
      assert.same({ action = "state-verify", profile = "dev", json = false }, parse("state", "verify", "--profile", "dev"))
      cmd, msg = parse("state", "rm")
      assert.is_nil(cmd)
      assert.matches("exactly one DOMAIN%-ID", msg)
      assert.equal("state reset", parse("state", "reset", "--help").topic)
      assert.equal("state list", parse("state", "list", "--help").topic)
    end)

    it("refuses more persistent directories than the bindings take, as a usage error", function()
      for _, sub in ipairs({ "reset", "inspect" }) do
        local args = { "state", sub, "--profile", "p" }
        for _ = 1, 65 do args[#args + 1] = "/etc" end
        local cmd, msg = parse(table.unpack(args))
        assert.is_nil(cmd)
        assert.matches("at most 64 persistent directories", msg)
        args[#args] = nil
        assert.is_not_nil(parse(table.unpack(args)))
      end
    end)

    it("refuses a reset without a profile, without a scope, or with both scopes", function()
      local cases = {
        { { "state", "reset", "--all" }, "needs %-%-profile" },
        { { "state", "reset", "--profile", "dev" }, "or %-%-all" },
        { { "state", "reset", "--profile", "dev", "--all", "/usr" }, "not both" },
        { { "state", "list", "x" }, "takes no arguments" },
        { { "state", "wipe" }, "unknown state command 'wipe'" },
        { { "state", "list", "--", "x" }, "takes no command after" },
      }
      for _, c in ipairs(cases) do
        local cmd, msg = parse(table.unpack(c[1]))
        assert.is_nil(cmd, table.concat(c[1], " "))
        assert.matches(c[2], msg)
      end
    end)
  end)

  describe("image and init", function()
    it("parses image prepare IMAGE, with or without --config", function()
      assert.same({ action = "image-prepare", image = "oci:/srv/img:latest" },
        assert(parse("image", "prepare", "oci:/srv/img:latest")))
      assert.same({ action = "image-prepare", image = "docker://debian:12", config = "/c.toml" },
        assert(parse("image", "prepare", "--config", "/c.toml", "docker://debian:12")))
      assert.same({ action = "image-prepare", image = "docker-archive:/t.tar", config = "/c" },
        assert(parse("image", "prepare", "docker-archive:/t.tar", "--config=/c")))
    end)

    it("parses image list with and without --json", function()
      assert.same({ action = "image-list", json = true }, assert(parse("image", "list", "--json")))
      assert.same({ action = "image-list", json = false, config = "/c" },
        assert(parse("image", "list", "--config", "/c")))
    end)

    it("parses image gc with and without --dry-run", function()
      assert.same({ action = "image-gc", dry_run = true }, assert(parse("image", "gc", "--dry-run")))
      assert.same({ action = "image-gc", dry_run = false }, assert(parse("image", "gc")))
    end)

    it("parses image build-default", function()
      assert.same({ action = "image-build-default" }, assert(parse("image", "build-default")))
      assert.same({ action = "image-build-default", config = "/c" },
        assert(parse("image", "build-default", "--config", "/c")))
    end)

    it("parses init with and without --config", function()
      assert.same({ action = "init", config = "F" }, assert(parse("init", "--config", "F")))
      assert.same({ action = "init" }, assert(parse("init")))
    end)

    it("parses init --agent NAME for each known agent, with or without =", function()
      assert.same({ action = "init", agent = "claude" }, assert(parse("init", "--agent", "claude")))
      assert.same({ action = "init", agent = "codex", config = "/c" },
        assert(parse("init", "--config", "/c", "--agent=codex")))
    end)

    it("refuses an unknown agent, listing the known ones", function()
      for _, name in ipairs({ "gemini", "Claude", "claude ", "default" }) do
        local cmd, msg = parse("init", "--agent", name)
        assert.is_nil(cmd, name)
        assert.equal("init --agent: unknown agent '" .. name .. "' (known: claude, codex)", msg)
      end
    end)

    it("refuses a missing or extra IMAGE, extra arguments and unknown subcommands", function()
      local cases = {
        { { "image", "prepare" }, "image prepare needs exactly one IMAGE" },
        { { "image", "prepare", "a", "b" }, "image prepare needs exactly one IMAGE" },
        { { "image", "prepare", "a", "--", "b" }, "takes no command after %-%-" },
        { { "image", "prepare", "a", "--config" }, "needs a value" },
        { { "image", "prepare", "a", "--json" }, "unknown option '%-%-json'" },
        { { "image", "list", "x" }, "image list takes no arguments" },
        { { "image", "list", "--dry-run" }, "unknown option '%-%-dry%-run'" },
        { { "image", "list", "--json=yes" }, "takes no value" },
        { { "image", "gc", "x" }, "image gc takes no arguments" },
        { { "image", "gc", "--json" }, "unknown option '%-%-json'" },
        { { "image", "gc", "--dry-run", "--dry-run" }, "given twice" },
        { { "image", "build-default", "debian" }, "image build%-default takes no arguments" },
        { { "image", "build-default", "--", "x" }, "takes no command after %-%-" },
        { { "image" }, "unknown image command ''" },
        { { "image", "pull" }, "unknown image command 'pull' %(expected: prepare, list, gc, "
          .. "build%-default%)" },
        { { "image", "--json" }, "unknown image command" },
        { { "init", "x" }, "init takes no arguments" },
        { { "init", "--", "x" }, "init takes no arguments" },
        { { "init", "--profile", "p" }, "unknown option '%-%-profile'" },
        { { "init", "--config" }, "needs a value" },
        { { "init", "--agent" }, "option '%-%-agent' needs a value" },
        { { "init", "--agent=" }, "option '%-%-agent' needs a non%-empty value" },
        { { "init", "--agent", "claude", "--agent", "codex" }, "option '%-%-agent' given twice" },
        { { "init", "--agent", "claude", "extra" }, "init takes no arguments" },
      }
      for _, case in ipairs(cases) do
        local cmd, msg = cli.parse(case[1])
        assert.is_nil(cmd, table.concat(case[1], " "))
        assert.matches(case[2], msg, nil, nil, table.concat(case[1], " "))
      end
    end)

    it("launches profiles named image or init only through run --profile", function()
      local cmd, msg = parse("--config", "/c", "image")
      assert.is_nil(cmd)
      assert.matches("run %-%-profile image", msg)
      cmd, msg = parse("--config", "/c", "init")
      assert.is_nil(cmd)
      assert.matches("run %-%-profile init", msg)
      cmd = assert(parse("run", "--profile", "init"))
      assert.same({ action = "launch", profile = "init" }, cmd)
    end)

    it("routes --help of image, its subcommands and init to their own text", function()
      local topics = {
        { { "image", "--help" }, "image" },
        { { "image", "-h" }, "image" },
        { { "image", "prepare", "--help" }, "image prepare" },
        { { "image", "prepare", "oci:/x", "-h" }, "image prepare" },
        { { "image", "list", "--help" }, "image list" },
        { { "image", "gc", "--help" }, "image gc" },
        { { "image", "build-default", "--help" }, "image build-default" },
        { { "init", "--help" }, "init" },
        { { "init", "-h" }, "init" },
      }
      for _, t in ipairs(topics) do
        local cmd = assert(cli.parse(t[1]))
        assert.same({ action = "help", topic = t[2] }, cmd, table.concat(t[1], " "))
        assert.equal(cli.help[t[2]], cli.help_text(t[2]))
        assert.matches("^Usage: lazaret " .. t[2]:gsub("%-", "%%-"), cli.help_text(t[2]))
      end
      assert.matches("IMAGE is oci:PATH%[:TAG%], docker%-archive:PATH or docker://REF",
        cli.help_text("image"))
      assert.matches("mmdebstrap", cli.help_text("image build-default"))
      assert.matches("Never replaces a file", cli.help_text("init"))
      assert.matches("%-%-agent NAME", cli.help_text("init"))
      assert.matches("claude, codex", cli.help_text("init"))
      local main = cli.help_text("main")
      assert.matches("\n  image ", main)
      assert.matches("\n  init ", main)
    end)
  end)

  it("parses --version", function()
    assert.same({ action = "version" }, parse("--version"))
  end)

  it("leaks no globals", function()
    local before = {}
    for k in pairs(_G) do before[k] = true end
    package.loaded["lazaret.cli"] = nil
    require("lazaret.cli").parse({ "dev" })
    for k in pairs(_G) do
      assert.is_true(before[k] ~= nil, "global leaked: " .. tostring(k))
    end
  end)
end)
