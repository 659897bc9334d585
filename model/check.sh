#!/bin/sh
# Model-check the claim/lease/fence protocol in model/effects.pml with spin.
#
# Every correct variant must be verified exhaustively with no error, and
# every deliberately broken variant must produce an assertion violation
# ("at most one effect per identity"). Exits non-zero otherwise.
#
# spin is installed through apt-get when missing and this runs as root.
# Measured 2026-12-06 (UTC) on two shared cores, with the reopen that retires
# the newest token when nothing passed and the operator's race with an
# attempt stalled before its pass: every variant in 7 min 59 s wall (126 s
# of CPU) at 1-minute load average 9.7 to 11.8 (a CI run alongside); the
# model before that change took 3 min 12 s at load 2.7 to 3.2 and 5 min 24 s
# at 5.2 to 6.5. Most of it is fenced-2-regions (41.2 million states, peak
# 2.54 GB); each other variant takes under 20 s (fenced-resolve-2-regions
# 8.3 million states, fenced-resolve-1-region 9.9 million).
# Usage: model/check.sh            (from anywhere)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
model="$here/effects.pml"

if ! command -v spin >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "model: installing spin (apt-get)"
		# Wait up to 120 s for a concurrent apt/dpkg to release its lock.
		apt-get -o DPkg::Lock::Timeout=120 update >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y spin >/dev/null
	else
		echo "model: spin is not installed (apt-get install spin)" >&2
		exit 1
	fi
fi
command -v gcc >/dev/null 2>&1 || { echo "model: gcc is required" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/idemkit-model.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# verify NAME EXPECT WHY FLAGS...: EXPECT is pass or fail; for fail, WHY is
# the assertion the counterexample must violate (a fixed string).
fails=0
verify() {
	name=$1
	expect=$2
	why=$3
	shift 3
	dir="$work/$name"
	mkdir -p "$dir"
	cp "$model" "$dir/effects.pml"
	(
		cd "$dir"
		spin -a "$@" effects.pml >spin.out 2>&1 || { cat spin.out; exit 3; }
		# -DSAFETY: safety properties only; -DCOLLAPSE: exhaustive, compressed.
		# A variant expected to fail stops at a counterexample a few dozen
		# steps deep, so its verifier is built unoptimised: the build, not
		# the search, was most of its time (about 1 s of CPU saved each).
		opt=-O2
		[ "$expect" = fail ] && opt=-O0
		gcc $opt -DSAFETY -DCOLLAPSE -DMEMLIM=4096 -o pan pan.c >gcc.out 2>&1 || { cat gcc.out; exit 3; }
		# -m: search depth bound far above the model's reach (checked below).
		./pan -m200000 $pan_hash >pan.out 2>&1 || true
	) || { echo "FAIL  $name: could not build the verifier"; fails=$((fails + 1)); return; }
	out="$dir/pan.out"
	states=$(sed -n 's/^ *\([0-9e+.]*\) states, stored.*/\1/p' "$out")
	if grep -q "reached -DMEMLIM bound\|search depth too small\|max search depth too small" "$out"; then
		echo "FAIL  $name: search incomplete"
		sed -n '1,40p' "$out"
		fails=$((fails + 1))
		return
	fi
	if grep -q "errors: 0" "$out"; then
		got=pass
	elif grep -q "assertion violated" "$out"; then
		got=fail
		# A counterexample must violate the intended assertion, no other.
		[ "$expect" = fail ] && ! grep -qF "assertion violated $why" "$out" && got=other-assertion
	else
		echo "FAIL  $name: unexpected verifier output"
		sed -n '1,40p' "$out"
		fails=$((fails + 1))
		return
	fi
	if [ "$got" = "$expect" ]; then
		if [ "$got" = pass ]; then
			echo "ok    $name: at most one effect per identity holds ($states states, exhaustive)"
		else
			echo "ok    $name: counterexample found as expected: $(grep -m1 'assertion violated' "$out")"
		fi
	else
		echo "FAIL  $name: expected $expect, got $got"
		if [ "$got" = fail ]; then
			# Replay the counterexample trail for the log.
			(cd "$dir" && spin -t -p -g "$@" effects.pml 2>&1 | tail -60) || true
		fi
		fails=$((fails + 1))
	fi
}

# pan_hash: pan's hash table size for the next variant ("" is pan's default,
# -w24: 16 M slots, grown to -w26 only once 33 M states are stored).
pan_hash=

# Correct protocols: must verify.
safety='(performed<=1)'
# 41.2 million states: a table of 64 M slots (512 MB) from the start.
# Measured 2026-12-04 (UTC), this variant's pan alone, twice each way, at
# 1-minute load average 16 to 21: 9.5 million hash conflicts instead of 33
# million, 104 and 109 s of user CPU instead of 133 and 137 s, peak memory
# 2.55 GB instead of 2.66 GB; the same 41593037 states (41187262 since the
# reopen retires the newest token when nothing passed).
pan_hash=-w26
verify fenced-2-regions pass - -DFENCED
pan_hash=
verify fenced-1-region pass - -DFENCED -DREGIONS=1
verify fenced-resolve-2-regions pass - -DFENCED -DRESOLVE
verify fenced-resolve-1-region pass - -DFENCED -DRESOLVE -DREGIONS=1
verify reconciled-provider-dedup pass - -DDEDUP
# Non-vacuity of the fenced model: these events must be reachable.
verify reach-stale-token-rejected fail '0 ' -DFENCED -DREACH_STALE
verify reach-remote-region-fires fail '(r==0)' -DFENCED -DREACH_FIRE_REMOTE
verify reach-fire-after-unsent-reopen fail '(reopened!=1)' -DFENCED -DREACH_UNSENT_FIRE
verify reach-fire-after-resolve-reopen fail '(reopened!=2)' -DFENCED -DRESOLVE -DREACH_RESOLVE_FIRE
verify reach-fire-after-resolve-lost-race fail '( !(rlost)||(reopened!=2))' -DFENCED -DRESOLVE -DREACH_RESOLVE_LOST_FIRE
verify reach-late-pass-after-resolve-refused fail '(late!=mytok)' -DFENCED -DRESOLVE -DREACH_LATE_PASS
# Deliberately broken protocols: must be refuted.
verify broken-ponr-without-fence-check fail "$safety" -DFENCED -DBROKEN_PONR
verify broken-unfenced-2-regions fail "$safety"
verify broken-lease-only-1-region fail "$safety" -DREGIONS=1
verify broken-notsent-after-the-call-left fail "$safety" -DFENCED -DBROKEN_NOTSENT_LIES
verify broken-reopen-any-token fail "$safety" -DFENCED -DBROKEN_REOPEN_ANY
verify broken-reopen-after-escaped-attempt fail "$safety" -DFENCED -DBROKEN_REOPEN_ESCAPED
verify broken-reopen-reissues-tokens fail "$safety" -DFENCED -DBROKEN_REOPEN_RESETS
verify broken-reopen-keeps-unpassed-token fail "$safety" -DFENCED -DRESOLVE -DBROKEN_REOPEN_KEEPS_UNPASSED
verify broken-resolve-after-the-call-left fail "$safety" -DFENCED -DRESOLVE -DBROKEN_RESOLVE_LIES
verify broken-resolve-while-attempt-runs fail "$safety" -DFENCED -DRESOLVE -DBROKEN_RESOLVE_ALIVE

if [ "$fails" -ne 0 ]; then
	echo "model: $fails check(s) failed" >&2
	exit 1
fi
echo "model: all checks passed"
