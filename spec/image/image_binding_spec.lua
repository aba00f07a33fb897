-- busted spec for bindings/image/l_image.c (lazaret.core.image): what the
-- binding holds while Lua runs in the middle of a preparation. A small
-- two-layer OCI layout is written with python3 (no network, no umoci); the
-- preparation itself has cmocka and e2e tests (tests/image, tests/e2e/
-- test_image.sh). Runs as the test user (layers are unpacked in a user
-- namespace with its subordinate IDs).
require("lazaret_spec")
local config = require("lazaret.core.config")
local image = require("lazaret.core.image")

local MKOCI = [[
import hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
os.makedirs(out + "/blobs/sha256", exist_ok=True)
def blob(data):
    d = hashlib.sha256(data).hexdigest()
    with open(f"{out}/blobs/sha256/{d}", "wb") as f:
        f.write(data)
    return "sha256:" + d, len(data)
layers = []
for n in range(2):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
        data = (b"x" * 100000) + bytes([n])
        ti = tarfile.TarInfo(f"f{n}")
        ti.size, ti.mode, ti.mtime = len(data), 0o644, 1700000000
        t.addfile(ti, io.BytesIO(data))
    layers.append(blob(bio.getvalue()))
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                  "rootfs": {"type": "layers", "diff_ids": [d for d, _ in layers]}}).encode()
cd, cs = blob(cfg)
man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": s}
               for d, s in layers]}).encode()
md, ms = blob(man)
with open(out + "/index.json", "w") as f:
    json.dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
               "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md,
                              "size": ms, "platform": {"architecture": "amd64", "os": "linux"},
                              "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}, f)
with open(out + "/oci-layout", "w") as f:
    f.write('{"imageLayoutVersion":"1.0.0"}')
]]

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -m 0700 " .. p))
  return p
end

describe("lazaret.core.image", function()
  local dir, cfg, ref

  before_each(function()
    dir = tmpdir()
    local f = assert(io.open(dir .. "/mkoci.py", "w"))
    f:write(MKOCI)
    f:close()
    assert(os.execute("python3 " .. dir .. "/mkoci.py " .. dir .. "/layout"))
    ref = "oci:" .. dir .. "/layout:latest"
    f = assert(io.open(dir .. "/c.toml", "w"))
    f:write('version = 1\n[storage]\ndata_root = "' .. dir .. '/data"\n')
    f:close()
    assert(os.execute("chmod 0600 " .. dir .. "/c.toml"))
    cfg = assert(config.load({ config = dir .. "/c.toml" }))
  end)

  after_each(function()
    cfg = nil
    collectgarbage()
    collectgarbage()
    -- A prepared tree holds files of subordinate IDs: gc removes it.
    local c = config.load({ config = dir .. "/c.toml" })
    if c then
      image.gc(c, { keep = 0 })
      c:close()
    end
    os.execute("chmod -R u+rwX " .. dir .. " 2>/dev/null; rm -rf " .. dir .. " 2>/dev/null")
  end)

  describe("prepare", function()
    -- The Storage Root the preparation works beneath is cfg's: closing cfg
    -- from the progress callback would free it (and close its descriptor,
    -- whose number the next open reuses) under the preparation.
    it("refuses cfg:close() from the progress callback and prepares the image", function()
      local calls, closes = 0, {}
      local r, msg = image.prepare(cfg, { image = ref, progress = function()
        calls = calls + 1
        local ok, e = pcall(cfg.close, cfg)
        closes[#closes + 1] = ok and "closed" or tostring(e)
      end })
      assert.is_table(r, msg)
      assert.matches("^%x+$", r.artifact_id)
      assert.is_true(calls > 0)
      for _, e in ipairs(closes) do
        assert.matches("the configuration is in use", e)
      end
      -- Released when prepare returned: the artifact is listed, and cfg closes.
      local list = assert(image.list(cfg))
      assert.are.equal(r.artifact_id, list[1].id)
      cfg:close()
      assert.matches("%(closed%)", tostring(cfg))
    end)

    it("releases cfg when the preparation fails", function()
      local r, _, code = image.prepare(cfg, { image = "oci:" .. dir .. "/missing:latest", progress = function() end })
      assert.is_nil(r)
      assert.is_number(code)
      cfg:close()
      assert.matches("%(closed%)", tostring(cfg))
    end)

    it("raises on an options table with a metatable or an image with a NUL byte", function()
      assert.has_error(function() image.prepare(cfg, setmetatable({ image = ref }, {})) end,
        "the options must be a plain table (it has a metatable)")
      assert.has_error(function() image.prepare(cfg, { image = ref .. "\0x" }) end,
        "option 'image' contains a NUL byte")
      assert.has_error(function() image.gc(cfg, { spare = "ab\0" }) end, "option 'spare' contains a NUL byte")
    end)
  end)
end)
