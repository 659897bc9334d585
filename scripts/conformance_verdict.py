#!/usr/bin/env python3
"""Verdict over the public OpenWOP conformance suite's output (make conformance).

usage: conformance_verdict.py SCENARIO_MAJORS_JSON LANE=OUTPUT_FILE...

Each OUTPUT_FILE is what the suite's summarizer (local/summarize.mjs) printed
for one lane: one line per test, `<disposition> <file> :: <test>`, optionally
followed by `-> <detail>`, and last `N passed, M failed`. The verdict fails
(exit 1) when

  - any lane reports a failure (M > 0, or an executed-fail line);
  - any test was not executed and its reason is not one of the explained
    families below (an unexplained skip: a scenario registered for major 1
    only, or a capability family idemkit does not advertise);
  - a scenario idemkit must witness in full did not: in the "seams" lane the
    business-key scenario (the provider sees the ledger's key on a forced
    transport retry), the effect-seam manifest, no re-fire on replay, the
    replay's per-ordinal suppression and the effect-ledger keying of real
    rows (the conformance fixtures issue an effect under
    --conformance-seams); in the "in-flight" lane the in-flight loser leg
    with its 409 branch run (not a partial witness).

It prints every skip with its explanation, then one line per lane and a total.
"""
import json
import os
import re
import sys

LINE = re.compile(r"^(executed-pass|executed-fail|inapplicable|skipped|blocked)\s+(\S+) :: (.*)$")
DETAIL = re.compile(r"^\s+-> (.*)$")
TOTAL = re.compile(r"^(\d+) passed, (\d+) failed")

# Capability families idemkit does not advertise, recognised by the reason
# the scenario itself records. (idemkit advertises replay: a skip naming the
# replay family is unexplained.)
FAMILIES = [
    ("webhooks family not advertised", "webhook subscriptions are not implemented by idemkit"),
    ("interrupt family not advertised", "interrupts are not implemented by idemkit"),
]

# (lane, file, test substring) that must be an executed pass with no
# partial-witness note.
REQUIRED = [
    ("seams", "v2-effect-identity-business-key.test.ts", "same provider key"),
    ("seams", "v2-effect-seam-manifest.test.ts", "every row is guarded"),
    ("seams", "v2-effect-seam-no-refire.test.ts", "no re-fire on replay"),
    ("seams", "v2-replay-suppression-ordinal.test.ts", "its own ordinal"),
    ("seams", "v2-effect-ledger-keying.test.ts", "every row is keyed"),
    ("in-flight", "v2-idempotency-in-flight.test.ts", "each loser"),
    ("in-flight", "v2-idempotency-in-flight.test.ts", "exactly one run"),
]


def parse(path):
    tests, total = [], None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = LINE.match(line)
            if m:
                tests.append({"disposition": m.group(1), "file": m.group(2), "test": m.group(3), "detail": ""})
                continue
            m = DETAIL.match(line)
            if m and tests and not tests[-1]["detail"]:
                tests[-1]["detail"] = m.group(1)
                continue
            m = TOTAL.match(line)
            if m:
                total = (int(m.group(1)), int(m.group(2)))
    return tests, total


def explain(t, majors):
    lanes = majors.get(t["file"])
    if lanes is not None and 2 not in lanes:
        return "v1-only scenario (registered for target major %s; a v2 host is measured at major 2)" % "/".join(map(str, lanes))
    for needle, why in FAMILIES:
        if needle in t["detail"]:
            return why
    return None


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        majors = json.load(f).get("majors", {})
    ok, passed, failed, skipped = True, 0, 0, 0
    lanes = {}
    for arg in argv[2:]:
        lane, _, path = arg.partition("=")
        if not os.path.exists(path):
            print("conformance: lane %s produced no output (%s)" % (lane, path))
            ok = False
            continue
        tests, total = parse(path)
        lanes[lane] = tests
        if total is None:
            print("conformance: lane %s: no `N passed, M failed` line" % lane)
            ok = False
            continue
        p, m = total
        s = sum(1 for t in tests if t["disposition"] not in ("executed-pass", "executed-fail"))
        passed, failed, skipped = passed + p, failed + m, skipped + s
        if m > 0 or any(t["disposition"] == "executed-fail" for t in tests):
            ok = False
            for t in tests:
                if t["disposition"] == "executed-fail":
                    print("FAILED  [%s] %s :: %s\n        %s" % (lane, t["file"], t["test"], t["detail"]))
        for t in tests:
            if t["disposition"] in ("executed-pass", "executed-fail"):
                continue
            why = explain(t, majors)
            if why is None:
                ok = False
                print("UNEXPLAINED SKIP [%s] %s :: %s\n        %s: %s" % (lane, t["file"], t["test"], t["disposition"], t["detail"]))
            else:
                print("skip    [%s] %s :: %s\n        %s" % (lane, t["file"], t["test"], why))
        print("conformance lane %s: %d passed, %d failed, %d skipped" % (lane, p, m, s))
    for lane, file, needle in REQUIRED:
        hits = [t for t in lanes.get(lane, []) if t["file"] == file and needle in t["test"]]
        if not hits or any(t["disposition"] != "executed-pass" or t["detail"].startswith("partial-witness") for t in hits):
            ok = False
            got = "; ".join("%s %s" % (t["disposition"], t["detail"]) for t in hits) or "not run"
            print("NOT WITNESSED [%s] %s :: %s -> %s" % (lane, file, needle, got))
    print("conformance: %d passed, %d failed, %d skipped (%s)" % (
        passed, failed, skipped, "every skip explained" if ok else "see above"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
