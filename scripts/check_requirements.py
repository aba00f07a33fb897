#!/usr/bin/env python3
"""Checks docs/requirements.md against the tests (issue 17).

Every requirement of the specification's section 4 (the IDs below) has one
row: its ID, a status ("met", or "partly met"/"not met" naming the open
issue that will meet it) and the tests that prove it, each a backticked
`FILE: NAME` reference:
  tests/e2e/*.sh        NAME is a literal `t_run "NAME"`
  tests/*/*.c           NAME is a `static void NAME(` test function
  spec/**/*_spec.lua    NAME is an `it("NAME"` case
  protocol/*.pml        NAME is an `ltl NAME` property or `proctype NAME`
A renamed or deleted test, a missing or duplicated requirement, an unknown
status, or a met requirement without a test fails the check. When the
specification is beside the repository (../shared/spec, as on the
development machines), its IDs must be exactly the list below.

Prints one line per failure and a summary; exits 1 on any failure.
"""
import glob
import os
import re
import sys

IDS = ["SR-1", "SR-3", "SR-4", "SR-5", "SR-6", "SR-10", "SR-11", "SR-12", "SR-13", "SR-14", "SR-15",
       "FR-1", "FR-3", "FR-4", "FR-7", "FR-8", "FR-9", "FR-11", "FR-14", "FR-15", "FR-16", "FR-17",
       "FR-19", "FR-20", "FR-21", "FR-22",
       "DX-1", "DX-2", "DX-3", "DX-4", "DX-5", "DX-6",
       "OR-4", "OR-5", "OR-6", "OR-7"]

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def find(name):
    hits = [p for pattern in ("tests/*/" + name, "tests/*/*/" + name, "spec/" + name, "spec/**/" + name,
                              "protocol/" + name)
            for p in glob.glob(os.path.join(repo, pattern), recursive=True)]
    return sorted(set(hits))


def defines(path, name):
    text = open(path, encoding="utf-8").read()
    if path.endswith(".sh"):
        return ('t_run "%s"' % name) in text
    if path.endswith(".c"):
        return re.search(r"^static void %s\(" % re.escape(name), text, re.M) is not None
    if path.endswith(".lua"):
        return ('it("%s"' % name) in text
    if path.endswith(".pml"):
        return re.search(r"^(ltl|active proctype|proctype) %s\b" % re.escape(name), text, re.M) is not None
    return False


spec = os.path.join(repo, "..", "shared", "spec", "specification.md")
if os.path.exists(spec):
    found = sorted(set(re.findall(r"^\| \*\*((?:SR|FR|DX|OR)-\d+)\*\*", open(spec, encoding="utf-8").read(), re.M)))
    if found != sorted(IDS):
        fail("the specification's requirement IDs differ from this script's list: %s" %
             sorted(set(found) ^ set(IDS)))

doc = open(os.path.join(repo, "docs", "requirements.md"), encoding="utf-8").read()
rows = {}
for line in doc.splitlines():
    m = re.match(r"^\| \*\*((?:SR|FR|DX|OR)-\d+)\*\* \| ([^|]*) \| ([^|]*) \| (.*) \|$", line)
    if not m:
        continue
    rid, status, refs = m.group(1), m.group(3).strip(), m.group(4)
    if rid in rows:
        fail("%s: listed twice" % rid)
    rows[rid] = (status, refs)

refs_checked = 0
for rid in IDS:
    if rid not in rows:
        fail("%s: no row in docs/requirements.md" % rid)
        continue
    status, refs = rows[rid]
    if not re.fullmatch(r"met|(partly met|not met) \(issue \d+\)", status):
        fail("%s: status %r is not 'met', 'partly met (issue N)' or 'not met (issue N)'" % (rid, status))
    tests = re.findall(r"`([^`:]+): ([^`]+)`", refs)
    if status == "met" and not tests:
        fail("%s: met, but no test is named" % rid)
    for fname, name in tests:
        refs_checked += 1
        paths = find(fname)
        if not paths:
            fail("%s: %s: no such test file" % (rid, fname))
        elif not any(defines(p, name) for p in paths):
            fail("%s: %s has no test %r" % (rid, fname, name))
for rid in rows:
    if rid not in IDS:
        fail("%s: not a requirement of the specification" % rid)

print("%d requirements, %d test references, %d failures" % (len(IDS), refs_checked, len(failures)))
sys.exit(1 if failures else 0)
