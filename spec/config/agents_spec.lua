-- lazaret.config.agents: the profiles `lazaret init --agent NAME` writes
-- (docs/agents.md). Pure; the e2e test (tests/e2e/test_init.sh) checks the
-- written file against the real loader.
local agents = require("lazaret.config.agents")

local IMAGE = "oci:/home/u/.local/share/lazaret/images/default:latest"

-- The TOML lines that are not comments or blank.
local function live_lines(text)
  local lines = {}
  for line in text:gmatch("[^\n]*") do
    if line ~= "" and not line:match("^%s*#") then lines[#lines + 1] = line end
  end
  return lines
end

describe("lazaret.config.agents", function()
  it("knows claude and codex, sorted", function()
    assert.same({ "claude", "codex" }, agents.names())
  end)

  it("returns nil and the known names for any other name", function()
    for _, name in ipairs({ "gemini", "", "CLAUDE", 1 }) do
      local a, msg = agents.get(name)
      assert.is_nil(a)
      assert.equal("unknown agent '" .. tostring(name) .. "' (known: claude, codex)", msg)
    end
    assert.equal(agents.agents.claude, agents.get("claude"))
  end)

  for _, name in ipairs(agents.names()) do
    local a = agents.agents[name]

    describe(name, function()
      local text = agents.render(name, IMAGE)

      it("writes version 1 and one profile named after the agent with the image", function()
        local live = live_lines(text)
        assert.equal("version = 1", live[1])
        assert.equal("[profiles." .. name .. "]", live[2])
        assert.equal('image = "' .. IMAGE .. '"', live[3])
        assert.equal("[profiles." .. name .. ".network]", live[4])
        assert.equal("allow_domains = [", live[5])
        assert.equal("]", live[#live])
      end)

      it("lists every domain with its reason, and nothing else live", function()
        local live = live_lines(text)
        assert.equal(5 + #a.domains + 1, #live)
        for i, d in ipairs(a.domains) do
          assert.matches('^  "' .. d.name:gsub("%p", "%%%0") .. '", +# ' .. d.why:gsub("%p", "%%%0")
            .. "$", text:match('\n(  "' .. d.name:gsub("%p", "%%%0") .. '",[^\n]*)'))
          assert.equal('  "' .. d.name .. '",', live[5 + i]:match('^  "[^"]*",'))
          -- exact lower-case names (allow_domains also takes *.suffix)
          assert.matches("^[a-z0-9][a-z0-9.-]*[a-z]$", d.name)
        end
        for _, d in ipairs(a.left_out) do
          assert.matches('\n  # "' .. d.name:gsub("%p", "%%%0") .. '", +# ', text)
        end
      end)

      it("names its variables, commented out, and never a value", function()
        assert.is_true(#a.env > 0)
        assert.matches("\n# %[profiles%." .. name .. "%.env%]\n", text)
        for _, e in ipairs(a.env) do
          assert.matches("\n# " .. e.name .. ' = "' .. e.name .. '"\n', text)
        end
      end)

      it("says how to install the agent and which directories keep its state", function()
        assert.matches("npm install %-g " .. a.package:gsub("%p", "%%%0"), text)
        assert.matches("apt%-get install %-y nodejs npm", text)
        for _, s in ipairs(a.state) do
          assert.matches("\n#   " .. s.path:gsub("%p", "%%%0") .. " +", text)
          local covered = false
          for _, d in ipairs(agents.DEFAULT_PERSISTENT_DIRS) do
            covered = covered or s.path == d or s.path:sub(1, #d + 1) == d .. "/"
          end
          assert.is_true(covered, s.path)
        end
        assert.is_nil(text:match("\npersistent_dirs"), "the defaults cover it: no override")
      end)

      it("keeps comment lines within 80 columns", function()
        for line in text:gmatch("[^\n]+") do
          if not line:match("^image = ") then assert.is_true(#line <= 80, line) end
        end
      end)

      it("gives the next steps: build, launch, install, log in or set the variable", function()
        local steps = agents.next_steps(name)
        assert.matches("^next: lazaret image build%-default", steps)
        assert.matches("lazaret " .. name, steps)
        assert.matches(a.package:gsub("%p", "%%%0"), steps)
        assert.matches(a.env[1].name, steps)
      end)
    end)
  end

  it("is what docs/agents.md documents: every version, variable, directory and domain", function()
    local root = os.getenv("LZ_SOURCE_DIR") or "."
    local f = assert(io.open(root .. "/docs/agents.md"))
    local doc = f:read("a")
    f:close()
    local function named(s) return doc:find("`" .. s .. "`", 1, true) ~= nil end
    for _, name in ipairs(agents.names()) do
      local a = agents.agents[name]
      assert.is_true(doc:find("| " .. a.title .. " | `" .. a.package .. "` | " .. a.tried.version
        .. " | " .. a.tried.date .. " |", 1, true) ~= nil, name .. ": tried version and date")
      for _, cmd in ipairs(a.install) do assert.is_true(named(cmd), cmd) end
      for _, e in ipairs(a.env) do assert.is_true(named(e.name), e.name) end
      for _, s in ipairs(a.state) do assert.is_true(named(s.path), s.path) end
      for _, d in ipairs(a.domains) do
        assert.is_true(doc:find("| `" .. d.name .. "` | " .. d.why, 1, true) ~= nil, d.name)
      end
      for _, d in ipairs(a.left_out) do
        assert.is_true(doc:find("`" .. d.name .. "` (" .. d.why .. ")", 1, true) ~= nil, d.name)
      end
    end
  end)

  it("quotes the image as a TOML basic string", function()
    local text = agents.render("codex", 'oci:/a"b\\c:latest')
    assert.matches('\nimage = "oci:/a\\"b\\\\c:latest"\n', text, 1, true)
  end)

  it("writes persistent_dirs only when the defaults do not cover a state directory", function()
    local saved = agents.agents.codex.state
    agents.agents.codex.state = { { path = "/srv/codex", why = "test" } }
    local ok, text = pcall(agents.render, "codex", IMAGE)
    agents.agents.codex.state = saved
    assert.is_true(ok, text)
    assert.matches('\npersistent_dirs = %["/root", "/usr", "/var", "/etc", "/opt", "/srv/codex"%]\n',
      text)
  end)

  it("raises on an unknown agent or a missing image", function()
    assert.has_error(function() agents.render("gemini", IMAGE) end)
    assert.has_error(function() agents.render("claude", nil) end)
  end)
end)
