-- The sealed Lua state of the executable (bindings/host_seal.c): trusted
-- code comes only from the compiled-in bundle and the binding modules.
local spec = require("lazaret_spec")

local function sealed(code)
  local ok, result = spec.run_sealed(code)
  assert(ok, result)
  return result
end

describe("lazaret host seal", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/lazaret"))
    for _, name in ipairs({ "planted", "lazaret/planted", "lazaret/main" }) do
      local f = assert(io.open(dir .. "/" .. name .. ".lua", "w"))
      f:write("return 'HIJACKED'\n")
      f:close()
    end
  end)
  after_each(function()
    os.execute("rm -rf " .. dir)
  end)

  it("empties package.path and package.cpath", function()
    assert.equal("|", sealed("return package.path .. '|' .. package.cpath"))
  end)

  it("keeps only the preload searcher", function()
    assert.equal("1", sealed("return #package.searchers"))
  end)

  it("cannot load a module from a path even when package.path is set back", function()
    local code = "package.path = '" .. dir .. "/?.lua'; "
      .. "local ok, err = pcall(require, 'planted'); return tostring(ok) .. ' ' .. err"
    local result = sealed(code)
    assert.matches("^false ", result)
    assert.is_nil(result:find("HIJACKED", 1, true))
  end)

  it("loads lazaret.main from the bundle, not from a planted file", function()
    local code = "package.path = '" .. dir .. "/?.lua'; return type(require('lazaret.main').main)"
    assert.equal("function", sealed(code))
  end)

  it("removes every ambient-authority function", function()
    local names = {
      "dofile", "loadfile", "os.execute", "os.exit", "os.getenv", "os.remove", "os.rename",
      "os.tmpname", "io.popen", "io.open", "io.lines", "io.input", "io.output", "io.read",
      "io.close", "io.tmpfile", "package.loadlib", "package.searchpath", "string.dump",
      '("").dump', "debug", "package.loaded.debug",
    }
    for _, name in ipairs(names) do
      local expr = "return type(" .. name .. ")"
      assert.equal("nil", sealed(expr), name)
    end
  end)

  -- Bytecode is not verified by the Lua VM: any string's bytes made into
  -- a binary chunk would be memory writes. load reads source text only.
  it("makes load refuse a binary chunk, whatever mode is asked for", function()
    local code = [[
      local out = {}
      local bin = "\27Lua\84\0\25\147\13\10\26\10\4\8\8"
      for _, mode in ipairs({ "none", "b", "bt", "t" }) do
        local f, e
        if mode == "none" then f, e = load(bin, "=x") else f, e = load(bin, "=x", mode) end
        out[#out + 1] = tostring(f) .. ":" .. tostring(e)
      end
      local parts = { bin }
      local f, e = load(function() return table.remove(parts, 1) end, "=reader", "b")
      out[#out + 1] = tostring(f) .. ":" .. tostring(e)
      return table.concat(out, "|")
    ]]
    local result = sealed(code)
    local n = 0
    for part in result:gmatch("[^|]+") do
      n = n + 1
      assert.matches("^nil:attempt to load a binary chunk %(mode is 't'%)$", part)
    end
    assert.equal(5, n)
  end)

  it("keeps load for source text, with its chunk name and environment", function()
    assert.equal("3", sealed("return load('return 1 + 2')()"))
    assert.equal("7", sealed("return load('return x', '=c', 't', { x = 7 })()"))
    assert.equal("nil", sealed("x = 1; return tostring(load('return x', '=c', 'bt', {})())"))
    assert.equal("c:1:", sealed("local _, e = load('return +', '=c'); return e:match('^[^ ]+')"))
    assert.equal("4", sealed("local p = { 'return ', '4' }; return load(function() return table.remove(p, 1) end)()"))
    assert.equal("2", sealed("return select('#', load('syntax error here'))"))
  end)

  it("keeps output and the binding modules reachable", function()
    assert.equal("function", sealed("return type(io.write)"))
    assert.equal("function", sealed("return type(require('lazaret.core.config').load)"))
    assert.equal("function", sealed("return type(require('lazaret.core.probe').kernel)"))
  end)

  it("bundles every production module", function()
    for _, m in ipairs({ "lazaret.main", "lazaret.cli", "lazaret.json", "lazaret.platform.diag",
      "lazaret.platform.report", "lazaret.config.report", "lazaret.userenv",
      "lazaret.platform.userreport", "lazaret.core.script" }) do
      assert.equal("table", sealed("return type(require('" .. m .. "'))"), m)
    end
  end)
end)
