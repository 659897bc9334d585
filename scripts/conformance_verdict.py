#!/usr/bin/env python3
"""Verdict over the public OpenWOP conformance suite's output (make conformance).

usage: conformance_verdict.py SCENARIO_MAJORS_JSON LANE=OUTPUT_FILE...

Each OUTPUT_FILE is what the suite's summarizer (local/summarize.mjs) printed
for one lane: one line per test, `<disposition> <file> :: <test>`, optionally
followed by `-> <detail>`, and last `N passed, M failed`. The verdict fails
(exit 1) when

  - any lane reports a failure (M > 0, or an executed-fail line);
  - any test was not executed and its reason is not one of the explained
    ones below (a scenario registered for major 1 only, a family or surface
    idemkit does not offer, or in a lane without --conformance-seams
    ("default", "moto", "dynalite") an exercise only the seams offer);
  - a scenario idemkit must witness in full did not: in the "seams" lane the
    business-key scenario (the provider sees the ledger's key on a forced
    transport retry), the effect-seam manifest, no re-fire on replay, the
    replay's per-ordinal suppression and the effect-ledger keying of real
    rows (the conformance fixtures issue an effect under
    --conformance-seams), the five durability rows, the terminal event
    under duplicate delivery, the fork prefix and the running-run cancel;
    in every lane but "in-flight" the version-header refusal and every leg
    of the conditional snapshot read (on dynalite too, whose runs dev
    executes without streams); in the "in-flight" lane the
    in-flight loser leg with its 409 branch run (not a partial witness).

It prints every skip with its explanation, then one line per lane and a total.
"""
import json
import os
import re
import sys

LINE = re.compile(r"^(executed-pass|executed-fail|inapplicable|skipped|blocked)\s+(\S+) :: (.*)$")
DETAIL = re.compile(r"^\s+-> (.*)$")
TOTAL = re.compile(r"^(\d+) passed, (\d+) failed")

# The lanes that run dev without --conformance-seams: the default one (on
# dev's default engine) and one per other engine.
NO_SEAMS = ("default", "moto", "dynalite")

# Skips explained by the reason the scenario itself records: a family or
# surface idemkit does not offer (in every lane), or a seams-only exercise
# skipped in a lane without --conformance-seams (NO_SEAMS): the
# REQUIRED rows below hold the seams lane to running it. (idemkit
# advertises replay: a skip naming the replay family is unexplained.)
# Each row: (substring of the recorded reason, explanation, lanes or None).
FAMILIES = [
    ("webhooks family not advertised", "webhook subscriptions are not implemented by idemkit", None),
    ("/webhooks is not mounted on this host", "webhook subscriptions are not implemented by idemkit", None),
    ("interrupt family not advertised", "interrupts are not implemented by idemkit", None),
    ("runList family not advertised", "the run list (GET /runs) is not implemented by idemkit", None),
    ("ancestryEndpointSupported not advertised", "run ancestry (getRunAncestry) is not implemented by idemkit", None),
    ("does not serve that origin cross-origin", "CORS: idemkit serves no browser origin cross-origin", None),
    ("one major only", "idemkit serves one major (2): there is no second major to compare", None),
    ("one major or none", "idemkit serves one major (2): there is no second major to compare", None),
    ("is served under /v1 either", "idemkit serves one major (2) and nothing under /v1", None),
    ("no 429 rate_limited response was observed", "idemkit has no rate limit of its own: no probe of the suite meets a 429", None),
    ("spec/v2/declaration.json is not present in this layout",
     "the shared suite copy holds no spec/v2/declaration.json (its SOURCES.md says why)", None),
    ("seams profile not advertised", "a seams-profile scenario: the seams lane runs it", NO_SEAMS),
    ("the noop fixture issued no external effect",
     "without the seams conformance-noop issues no effect; the seams lane's noop has one", NO_SEAMS),
    ("no RFC 0158 durability seam at /host/durability/kill (HTTP 404)",
     "the durability seam is served only under --conformance-seams: the seams lane runs it", NO_SEAMS),
    ("no RFC 0158 durability test hook at /host/durability/kill (HTTP 404)",
     "the durability seam is served only under --conformance-seams: the seams lane runs it", NO_SEAMS),
    ("conformance-failure fixture not advertised", "a seams-only fixture: the seams lane runs it", NO_SEAMS),
    ("conformance-cancellable fixture not advertised", "a seams-only fixture: the seams lane runs it", NO_SEAMS),
    ("conformance-multi-node fixture not advertised", "a seams-only fixture: the seams lane runs it", NO_SEAMS),
]

# (lane, file, test substring) that must be an executed pass with no
# partial-witness note.
REQUIRED = [
    ("seams", "v2-effect-identity-business-key.test.ts", "same provider key"),
    ("seams", "v2-effect-seam-manifest.test.ts", "every row is guarded"),
    ("seams", "v2-effect-seam-no-refire.test.ts", "no re-fire on replay"),
    ("seams", "v2-replay-suppression-ordinal.test.ts", "its own ordinal"),
    ("seams", "v2-effect-ledger-keying.test.ts", "every row is keyed"),
    ("seams", "v2-durability-recovery.test.ts", "survives a kill before dispatch"),
    ("seams", "v2-durability-recovery.test.ts", "real process death"),
    ("seams", "v2-durability-recovery.test.ts", "delivered twice fires each effect exactly once"),
    ("seams", "v2-durability-recovery.test.ts", "bound is derived"),
    ("seams", "v2-durability-recovery.test.ts", "deterministically failing work"),
    ("seams", "v2-terminal-event-once.test.ts", "work delivered twice"),
    ("seams", "v2-run-fork-prefix.test.ts", "inherits exactly [0, fromSeq)"),
    ("seams", "v2-run-cancel.test.ts", "cancelling a running run"),
    ("in-flight", "v2-idempotency-in-flight.test.ts", "each loser"),
    ("in-flight", "v2-idempotency-in-flight.test.ts", "exactly one run"),
]
for lane in NO_SEAMS + ("seams",):
    REQUIRED += [
        (lane, "v2-version-header-honored.test.ts", "honored or refused"),
        (lane, "v2-run-snapshot-etag.test.ts", "matching If-None-Match receives 304"),
        (lane, "v2-run-snapshot-etag.test.ts", "evaluated as RFC 9110 defines it"),
        (lane, "v2-run-snapshot-etag.test.ts", "304 carries the ETag and the Vary"),
        (lane, "v2-run-snapshot-etag.test.ts", "no-cache does not suppress"),
        (lane, "v2-run-snapshot-etag.test.ts", "does not exist gets the unconditional status"),
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


def explain(t, majors, lane):
    lanes = majors.get(t["file"])
    if lanes is not None and 2 not in lanes:
        return "v1-only scenario (registered for target major %s; a v2 host is measured at major 2)" % "/".join(map(str, lanes))
    for needle, why, only in FAMILIES:
        if needle in t["detail"] and (only is None or lane in only):
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
            why = explain(t, majors, lane)
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
