-- lazaret.diag.config: formatting of `lazaret config check`.
local report = require("lazaret.config.report")

local summary = {
  source = "/home/u/.config/lazaret/config.toml",
  storage_root = "/home/u/.local/share/lazaret",
  runtime_root = "/run/user/1000/lazaret",
  profile = "dev",
  workspace = "/tmp/w",
  domain_id = string.rep("ab", 32),
  fingerprint = string.rep("cd", 32),
  runsc_dcache = 50000,
  keep_unused_images = 0,
  profiles = 2,
}

describe("lazaret.config.report", function()
  it("prints every resolved fact on its own labelled line", function()
    local text = report.text(summary)
    assert.matches("\nstorage root: +/home/u/.local/share/lazaret\n", text)
    assert.matches("\nruntime root: +/run/user/1000/lazaret\n", text)
    assert.matches("\ndomain id: +" .. string.rep("ab", 32) .. "\n", text)
    assert.matches("\nfingerprint: +" .. string.rep("cd", 32) .. "\n", text)
    assert.matches("\nmax memory: +half of the host's memory per sandbox\n", text)
    assert.matches("configuration is valid\n$", text)
    assert.is_nil(text:find("image gc", 1, true)) -- no automatic policy set
    local with_gc = {}
    for k, v in pairs(summary) do with_gc[k] = v end
    with_gc.keep_unused_images = 3
    assert.matches("\nimage gc: +3 unused images kept when a Domain's last session ends\n", report.text(with_gc))
    with_gc.max_memory_mib = 4096
    assert.matches("\nmax memory: +4096 MiB per sandbox\n", report.text(with_gc))
    assert.matches('"max_memory_mib":4096', report.json(with_gc))
    assert.matches('"max_memory_mib":null', report.json(summary))
  end)

  it("omits profile facts when no profile was selected", function()
    local s = { source = "/c", storage_root = "/s", runtime_root = "/r", runsc_dcache = 0,
      keep_unused_images = 0, profiles = 0 }
    local text = report.text(s)
    assert.is_nil(text:find("domain id", 1, true))
    assert.is_nil(text:find("fingerprint", 1, true))
  end)

  -- The workspace's name may be the sandbox's: it never drives the
  -- terminal, and JSON stays JSON whatever its bytes.
  it("escapes what the paths hold that is not printable", function()
    require("lazaret_spec")
    local s = {}
    for k, v in pairs(summary) do s[k] = v end
    s.workspace = "/tmp/ws\27]0;PWNED\7\27[31mRED"
    local text = report.text(s)
    assert.is_nil(text:find("\27", 1, true))
    assert.is_nil(text:find("\7", 1, true))
    assert.matches("\nworkspace: +/tmp/ws\\", text)
    s.workspace = "/tmp/ws\255x"
    local ok, out = pcall(report.json, s)
    assert.is_true(ok, tostring(out))
    assert.is_nil(out:find("\255", 1, true))
    s.workspace = "/tmp/ws\194\155x" -- U+009B, CSI for some terminals
    assert.is_nil(report.json(s):find("\194\155", 1, true))
    s.workspace = "/tmp/caf\195\169" -- UTF-8 stays as it is
    assert.truthy(report.json(s):find("caf\195\169", 1, true))
    s.workspace = "/tmp/gpj.\226\128\174exe" -- U+202E, right-to-left override
    assert.is_nil(report.json(s):find("\226\128\174", 1, true))
    assert.truthy(report.json(s):find("u{202E}exe", 1, true))
  end)

  it("emits one JSON object with the documented keys", function()
    local out = report.json(summary)
    assert.matches('^{.*}\n$', out)
    for _, key in ipairs({ "config", "storage_root", "runtime_root", "profile", "workspace",
      "domain_id", "fingerprint", "runsc_dcache", "keep_unused_images", "profiles" }) do
      assert.matches('"' .. key .. '":', out)
    end
    assert.matches('"ok":true', out)
  end)

  it("emits null for profile facts when no profile was selected", function()
    local out = report.json({ source = "/c", storage_root = "/s", runtime_root = "/r",
      runsc_dcache = 1, profiles = 0 })
    assert.matches('"domain_id":null', out)
  end)
end)
