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
    assert.equal("state", cmd and cmd.action)
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
    for _, topic in ipairs({ "main", "run", "config", "config check", "diag", "state" }) do
      assert.matches("^Usage: lazaret", cli.help_text(topic))
    end
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
