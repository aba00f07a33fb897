-- An example qualification suite: `lazaret qualify examples/qualify.lua`.
-- The API is in docs/qualify.md. Every check runs in a fresh sandbox of the
-- profile with the scratch workspace at /workspace.
suite("example")

check("the image has a POSIX shell", function(t)
  local r = t:run({ "/bin/sh", "-c", "echo $((6 * 7))" })
  t:expect(r.status == 0 and r.output:match("42"), "sh -c: " .. r.output)
end)

check("the workspace round trip through the sandbox", function(t)
  t:write("input.txt", "one\ntwo\nthree\n")
  local r = t:run({ "/bin/sh", "-c", "wc -l < /workspace/input.txt > /workspace/count.txt" })
  t:expect(r.status == 0, "wc: " .. r.output)
  t:expect(t:read("count.txt"):match("^%s*3%s*$"), "counted " .. t:read("count.txt"))
end)

check("/tmp starts empty in every generation", function(t)
  t:run({ "/bin/sh", "-c", "touch /tmp/left-behind" })
  local r = t:run({ "/bin/sh", "-c", "test -e /tmp/left-behind && echo kept || echo gone" })
  t:expect(r.output:match("gone"), "/tmp survived a generation: " .. r.output)
end)

check("a terminal session sees its window size", function(t)
  local r = t:run({ "/bin/sh", "-c", "stty size" }, { terminal = true })
  t:expect(r.status == 0 and r.output:match("24 80"), "stty size: " .. r.output)
end)
