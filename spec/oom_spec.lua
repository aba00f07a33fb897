-- The bindings under memory errors (docs/architecture.md, "Binding
-- pattern"): a Lua allocation that fails raises, and the longjmp must
-- leave nothing C holds behind: no malloc'd result, no descriptor.
-- lazaret_spec.with_alloc_limit(k, f) runs f with every Lua allocation
-- after the first k refused; each case raises it from 0 until f succeeds,
-- so every allocation point of the binding fails once. What C leaked shows
-- in malloc's count (lazaret_spec.heap_in_use; a sanitizer's allocator
-- keeps none, and there only its own checks apply) or in /proc/self/fd.
local spec = require("lazaret_spec")
local lfs = require("lfs")

-- Runs f under every allocation limit until it succeeds once.
local function sweep(f)
  for k = 0, 2000 do
    if spec.with_alloc_limit(k, f) then return k end
  end
  error("never succeeded")
end

-- The bytes of C memory still held after sweep(f), its results collected.
local function heap_leaked(f)
  collectgarbage()
  collectgarbage()
  local before = spec.heap_in_use()
  sweep(f)
  collectgarbage()
  collectgarbage()
  return spec.heap_in_use() - before
end

local function descriptors()
  local n = 0
  for _ in lfs.dir("/proc/self/fd") do
    n = n + 1
  end
  return n
end

local LARGE = 512 * 1024 -- far above what Lua itself keeps between collections
local SLACK = 128 * 1024

describe("binding results under memory errors", function()
  it("has the test module's allocation limit and heap count", function()
    assert.is_true(spec.with_alloc_limit(100, function() return {} end))
    local ok, e = spec.with_alloc_limit(0, function() return {} end)
    assert.is_false(ok)
    assert.matches("not enough memory", e)
    assert.is_true(math.type(spec.heap_in_use()) == "integer")
  end)

  it("text.escape leaks nothing", function()
    local text = require("lazaret.core.text")
    local s = string.rep("a", LARGE)
    local k = 0
    local leaked = heap_leaked(function()
      k = k + 1
      return text.escape(s)
    end)
    assert.is_true(k > 1, "no allocation of text.escape failed")
    assert.is_true(leaked < SLACK, leaked .. " bytes leaked")
  end)

  it("a scratch workspace's read leaks nothing", function()
    local scratch = require("lazaret.core.scratch")
    local name = string.format("spec-oom-%d-%d", os.time(), math.random(1, 1e9))
    local ws = assert(scratch.open(name))
    assert.is_true(ws:write("big", string.rep("r", LARGE)))
    local leaked = heap_leaked(function() return ws:read("big") end)
    assert.is_true(leaked < SLACK, leaked .. " bytes leaked")
    local path = ws:path()
    ws:close()
    os.execute("rm -rf '" .. path .. "'")
  end)

  it("session.capture leaks no output", function()
    local session = require("lazaret.core.session")
    local args = { "-e", "io.write(string.rep('c', " .. LARGE .. "))" }
    local opts = { max_output = 1024 * 1024 }
    local leaked = heap_leaked(function()
      local r = assert(session.capture(args, opts))
      assert(#r.output == LARGE)
    end)
    assert.is_true(leaked < SLACK, leaked .. " bytes leaked")
  end)

  it("probe.runtime_root leaks no descriptor", function()
    local probe = require("lazaret.core.probe")
    local root = os.getenv("XDG_RUNTIME_DIR") .. "/lazaret"
    os.execute("mkdir -p -m 0700 '" .. root .. "'")
    assert.is_true(assert(probe.runtime_root()).exists)
    collectgarbage()
    local before = descriptors()
    sweep(function() return probe.runtime_root() end)
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, descriptors())
  end)
end)
