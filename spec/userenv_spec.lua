-- busted spec for lua/lazaret/userenv.lua: the restricted environment of a
-- user's Lua file (diag reports, qualification suites). Chunks run here
-- with load(code, name, "t", env), as lazaret.core.script runs them.
local userenv = require("lazaret.userenv")

local NOUN = "spec files"

local function run(env, code)
  return assert(load(code, "=user", "t", env))()
end

-- true when target is reachable from t through keys, values and the
-- metatables the environment's own getmetatable reveals.
local function reaches(env, target)
  local seen = {}
  local function walk(t)
    if rawequal(t, target) then
      return true
    end
    if type(t) ~= "table" or seen[t] then
      return false
    end
    seen[t] = true
    for k, v in next, t do
      if walk(k) or walk(v) then
        return true
      end
    end
    local mt = env.getmetatable(t)
    return type(mt) == "table" and walk(mt)
  end
  return walk(env)
end

describe("lazaret.userenv", function()
  local env
  before_each(function()
    env = userenv.new({}, NOUN)
  end)

  it("refuses every removed base function by name", function()
    for _, name in ipairs({ "load", "loadfile", "dofile", "collectgarbage", "warn", "loadstring" }) do
      local ok, msg = pcall(run, env, name .. "('return 1')")
      assert.is_false(ok, name)
      assert.matches(name .. " is not available to spec files", msg, 1, true)
    end
  end)

  it("refuses every removed os and io function by name", function()
    local names = {}
    for _, n in ipairs(userenv.REFUSED_OS) do names[#names + 1] = "os." .. n end
    for _, n in ipairs(userenv.REFUSED_IO) do names[#names + 1] = "io." .. n end
    for _, n in ipairs({ "os.execute", "os.getenv", "os.exit", "os.remove", "os.rename",
      "io.popen", "io.open", "io.lines", "io.read", "io.output", "io.input" }) do
      assert.is_truthy(table.concat(names, " "):find(n, 1, true), n .. " is not in the refused list")
    end
    for _, name in ipairs(names) do
      local ok, msg = pcall(run, env, name .. "('/tmp/lazaret-userenv-spec')")
      assert.is_false(ok, name)
      assert.is_truthy(msg:find(name .. " is not available to spec files", 1, true), msg)
    end
  end)

  it("refuses any other field of os, io, debug and package when read or written", function()
    for _, expr in ipairs({ "io.stdout", "io.stderr", "io.stdin", "os.nonesuch", "debug.getinfo",
      "debug.traceback", "debug.getregistry", "package.loaded", "package.preload", "package.path" }) do
      local ok, msg = pcall(run, env, "return " .. expr)
      assert.is_false(ok, expr)
      assert.is_truthy(msg:find(expr .. " is not available to spec files", 1, true), msg)
    end
    local ok, msg = pcall(run, env, "package.path = './?.lua'")
    assert.is_false(ok)
    assert.matches("package.path is not available", msg, 1, true)
  end)

  it("refuses C modules by name and every other module", function()
    local ok, msg = pcall(run, env, "return require('lazaret.core.probe')")
    assert.is_false(ok)
    assert.matches("C modules cannot be loaded by spec files (lazaret.core.probe)", msg, 1, true)
    ok, msg = pcall(run, env, "return require('lazaret.json')")
    assert.is_false(ok)
    assert.matches("modules cannot be loaded by spec files (lazaret.json)", msg, 1, true)
    assert.is_nil(msg:find("C modules", 1, true))
    ok, msg = pcall(run, env, "return require(42)")
    assert.is_false(ok)
    assert.matches("modules cannot be loaded", msg, 1, true)
  end)

  it("keeps the safe base functions, the pure libraries and os time", function()
    assert.are.equal(6, run(env, "return select('#', 1, 2, 3) + #table.concat({'a', 'b'}) + math.max(1, 1)"))
    assert.are.equal("abab", run(env, "return ('ab'):rep(2)"))
    assert.are.equal(3, run(env, "return utf8.len('äbc')"))
    assert.are.equal("number", run(env, "return type(os.time() + os.clock())"))
    assert.are.equal("string", run(env, "return type(os.date('%Y'))"))
    assert.are.equal("x", run(env, "local co = coroutine.wrap(function() coroutine.yield('x') end) return co()"))
    assert.is_true(run(env, "return pcall(error, 'e') == false"))
    assert.are.equal(env._VERSION, _VERSION)
  end)

  it("has no string.dump and does not reveal the string metatable", function()
    assert.is_nil(env.string.dump)
    assert.is_nil(run(env, "return string.dump"))
    assert.is_false(run(env, "return getmetatable('')"))
    assert.are.equal("table", run(env, "return type(getmetatable(setmetatable({}, {})))"))
  end)

  it("holds fresh copies: changing them changes nothing of the host", function()
    run(env, "string.format = nil; table.concat = nil; math.pi = 3; os.time = nil")
    assert.is_function(string.format)
    assert.is_function(table.concat)
    assert.are_not.equal(3, math.pi)
    assert.is_function(os.time)
    assert.is_nil(rawget(_G, "leaked"))
    run(env, "leaked = true")
    assert.is_nil(rawget(_G, "leaked"))
    assert.is_true(env.leaked)
  end)

  it("has no way to the host's _G, package, debug or libraries", function()
    assert.are_not.equal(_G, env._G)
    assert.are.equal(env, env._G)
    assert.are.equal(env, run(env, "return _G"))
    local host = { _G = _G, package = package, ["package.loaded"] = package.loaded,
      ["package.preload"] = package.preload, debug = debug, string = string, table = table,
      math = math, os = os, io = io, utf8 = utf8, coroutine = coroutine,
      ["string metatable"] = getmetatable(""), registry = debug.getregistry() }
    for name, t in pairs(host) do
      assert.is_false(reaches(env, t), name .. " is reachable from the environment")
    end
  end)

  it("io.write takes strings and numbers and returns nothing", function()
    assert.are.equal(0, run(env, "return select('#', io.write(''))"))
    local ok, msg = pcall(run, env, "io.write({})")
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'write'", msg, 1, true)
  end)

  it("makes the api's fields globals, over the standard names", function()
    local api = { lazaret = { answer = 42 }, print = "replaced" }
    env = userenv.new(api, NOUN)
    assert.are.equal(42, run(env, "return lazaret.answer"))
    assert.are.equal("replaced", env.print)
  end)

  it("raises on misuse", function()
    assert.has_error(function() userenv.new(nil, NOUN) end, "userenv.new: api must be a table")
    assert.has_error(function() userenv.new({}, "") end, "userenv.new: noun must be a non-empty string")
    assert.has_error(function() userenv.new({}) end)
  end)
end)
