-- busted spec for lua/lazaret/runtime/escalation.lua: how a verified
-- escalation request is routed and what the developer's prompt shows
-- (spec 3.8, 3.4). The coordinator bounds the route it is given
-- (core/runtime/coordinator.h); the real prompt in a terminal runs in
-- tests/e2e/test_escalation.sh.
require("lazaret_spec") -- lazaret.core.text (the escaper) is C

local esc = require("lazaret.runtime.escalation")

local function query(over)
  local q = {
    profile = "dev", session = "00112233445566778899aabbccddeeff", terminal = true,
    prompt_busy = false, argv = { "/usr/bin/git", "push", "origin", "main" },
    cwd = "/workspace/sub", why = "publish the branch",
  }
  for k, v in pairs(over or {}) do q[k] = v end
  return q
end

describe("escalation.route", function()
  it("auto-approves only a request the coordinator matched to a rule", function()
    assert.equal("auto", (esc.route(query({ rule = 1, terminal = false }))))
    assert.equal("prompt", (esc.route(query())))
  end)

  it("denies without a terminal and no rule, and says why", function()
    local action, text = esc.route(query({ terminal = false }))
    assert.equal("deny", action)
    assert.matches("no terminal", text)
    assert.matches("auto_approve", text)
  end)

  it("denies a second request while the session's prompt is up", function()
    local action, text = esc.route(query({ prompt_busy = true }))
    assert.equal("deny", action)
    assert.matches("waiting for the developer", text)
  end)

  it("prompts with the whole request", function()
    local action, text = esc.route(query())
    assert.equal("prompt", action)
    assert.equal(text, esc.prompt_text(query()))
  end)
end)

describe("escalation.prompt_text", function()
  it("shows profile, session, each argument on its own line, directory and why", function()
    local t = esc.prompt_text(query())
    assert.matches("profile    dev", t, 1, true)
    assert.matches("session    00112233445566778899aabbccddeeff", t, 1, true)
    assert.matches("argv[0]    /usr/bin/git\r\n  argv[1]    push\r\n  argv[2]    origin\r\n  argv[3]    main", t, 1, true)
    assert.matches("(asked from /workspace/sub)", t, 1, true)
    assert.matches("why        publish the branch", t, 1, true)
    local last = "Approve running /usr/bin/git with 3 arguments? [y/N] "
    assert.equal(last, t:sub(-#last))
  end)

  it("uses CR LF: the terminal is in raw mode", function()
    local t = esc.prompt_text(query())
    assert.is_nil(t:find("[^\r]\n"))
  end)

  it("escapes what the sandbox wrote: escape sequences, controls, newlines, invalid UTF-8, bidi", function()
    local t = esc.prompt_text(query({
      argv = { "/usr/bin/touch", "\27[2J\27]0;title\7", "a\nargv[9]    /bin/sh", "\255\254", "x\u{202E}y",
               "\u{5D0}/../-\u{336}-f" },
      cwd = "/w\r\27[31m", why = "\27[1Aapproved\0",
    }))
    -- Nothing of an escape sequence reaches the terminal whole.
    assert.is_nil(t:find("\27", 1, true))
    assert.is_nil(t:find("\7", 1, true))
    assert.is_nil(t:find("\0", 1, true))
    assert.is_nil(t:find("\u{202E}", 1, true))
    assert.matches("argv[1]    \\e[2J\\e]0;title\\x07", t, 1, true)
    -- A newline in an argument cannot forge another argument's line.
    assert.matches("argv[2]    a\\nargv[9]\\x20\\x20\\x20\\x20/bin/sh", t, 1, true)
    assert.equal(1, select(2, t:gsub("argv%[2%]", "")))
    assert.matches("argv[3]    \\xff\\xfe", t, 1, true)
    -- A right-to-left letter would reorder the path after it; a combining
    -- stroke would hide the option under it.
    assert.matches("argv[5]    \\u{05D0}/../-\\u{0336}-f", t, 1, true)
    assert.matches("(asked from /w\\r\\e[31m)", t, 1, true)
    assert.matches("why        \\e[1Aapproved\\x00", t, 1, true)
  end)

  it("leaves out an empty justification", function()
    assert.is_nil(esc.prompt_text(query({ why = "" })):find("why", 1, true))
  end)

  -- Each row of the prompt as the terminal shows it, and its columns as
  -- the coordinator counts them (a character beyond ASCII is two).
  local function rows_of(t)
    local rows = {}
    for row in (t .. "\r\n"):gmatch("(.-)\r\n") do rows[#rows + 1] = row end
    return rows
  end
  local function columns(row)
    local w = 0
    for _, c in utf8.codes(row) do w = w + (c < 0x80 and 1 or 2) end
    return w
  end

  it("folds a field wider than the terminal onto marked rows: no sandbox text starts a row", function()
    local pad = ("x"):rep(30) .. ("\u{4E00}"):rep(40) .. "argv[2]    make test"
    local t = esc.prompt_text(query({ cols = 40, rows = 50, argv = { "/bin/sh", "-c", pad }, why = "" }))
    local rows = rows_of(t)
    for _, row in ipairs(rows) do
      assert.is_true(columns(row) < 40, row)
      -- every row is the prompt's own, or a continuation that says so
      assert.is_true(row == "" or row:find("^lazaret: ") ~= nil or row:find("^  %a") ~= nil
        or row:find("^Approve ") ~= nil or row:find("^           | ") ~= nil, row)
    end
    assert.is_nil(t:find("\r\nargv[2]", 1, true))
    assert.matches("%[y/N%] $", rows[#rows])
  end)

  it("shows the spaces that would not show: runs, and one at either end", function()
    local t = esc.prompt_text(query({ argv = { "/usr/bin/git", " a", "b  c", "d " }, why = "" }))
    assert.matches("argv[1]    \\x20a\r\n", t, 1, true)
    assert.matches("argv[2]    b\\x20\\x20c\r\n", t, 1, true)
    assert.matches("argv[3]    d\\x20\r\n", t, 1, true)
    assert.matches("\\u{3000}", esc.prompt_text(query({ why = "\u{3000}" })), 1, true)
  end)

  it("denies a prompt that does not fit the screen at once, or a terminal too narrow", function()
    local argv = { "/usr/bin/git" }
    for i = 1, 30 do argv[#argv + 1] = "arg" .. i end
    local action, why = esc.route(query({ argv = argv, rows = 24, cols = 80 }))
    assert.equal("deny", action)
    assert.matches("has rows (24)", why, 1, true)
    assert.equal("prompt", (esc.route(query({ argv = argv, rows = 50, cols = 80 }))))
    action, why = esc.route(query({ rows = 24, cols = 20 }))
    assert.equal("deny", action)
    assert.matches("too narrow (20 columns)", why, 1, true)
  end)
end)
