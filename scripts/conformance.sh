#!/usr/bin/env bash
# make conformance: the public OpenWOP conformance suite (the wider copy:
# idempotency, wire/envelope, run-lifecycle and durability scenarios,
# ../shared/openwop-conformance-wide) against `idemkit dev`, target major 2,
# in five lanes, run at once, each with its own `idemkit dev` and engine:
#
#   default    every scenario, dev as a user starts it (no seams) and two
#              tenants, on its default engine (DynamoDB Local where java is
#              on PATH, else moto);
#   moto, dynalite
#              the same on each of the other two engines (dynalite has no
#              DynamoDB Streams: dev feeds its executor from its own writes);
#   seams      every scenario, dev with --conformance-seams: the seams
#              profile the effect scenarios need, the seams-only fixtures
#              (conformance-multi-node, -cancellable, -failure) and the
#              durability seam (/host/durability/kill, dev then being its own
#              restart supervisor, so the kill rows see a real process death);
#   in-flight  v2-idempotency-in-flight alone, dev with a 200 ms Layer-1 wait
#              budget, so losers of the same-key race are refused 409
#              idempotency_in_flight while the winner holds conformance-delay
#              (the suite asks for 1500 ms) — the branch the default 5 s
#              budget turns into replays.
#
# Each lane prints the suite summarizer's output (one line per test, a
# per-file table, `N passed, M failed`); scripts/conformance_verdict.py then
# fails the target on any failure, any skip it cannot explain (a v1-only
# scenario, a family idemkit does not offer, or in a lane without the
# seams an exercise only the seams offer), or a required scenario not
# witnessed in full.
#
# The suite folder may be read-only: it is copied to a temporary folder and
# `npm install`ed there. Without the suite: a failure under CI=true, else a
# skip with a message. Env: OWC_SUITE (default ../shared/openwop-conformance-wide),
# OWC_KEEP=1 keeps the temporary folder.
set -uo pipefail
proj=$(cd "$(dirname "$0")/.." && pwd)
suite_root=${OWC_SUITE:-$proj/../shared/openwop-conformance-wide}
if [ ! -f "$suite_root/conformance/package.json" ]; then
  msg="conformance: suite not found at $suite_root (the ../shared folder beside the clone)"
  if [ "${CI:-}" = true ]; then echo "$msg" >&2; exit 1; fi
  echo "$msg; skipped" >&2; exit 0
fi
work=$(mktemp -d /tmp/idemkit-conformance.XXXXXX)

# stop_dev PID: SIGTERM, then SIGKILL after 15 s.
stop_dev() {
  [ -n "${1:-}" ] || return 0
  kill "$1" 2>/dev/null
  for _ in $(seq 1 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
cleanup() {
  local p
  for p in $(jobs -p); do kill "$p" 2>/dev/null; done
  for p in "$work"/*.dev.pid; do [ -f "$p" ] && stop_dev "$(cat "$p")"; done
  [ "${OWC_KEEP:-0}" = 1 ] && echo "(logs kept in $work)" >&2 || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# freeport: a loopback port drawn below the kernel's ephemeral range (as
# the Go tests' engines get theirs), where no outgoing connection and no
# listener on port 0 is ever given it: the seams lane's supervisor binds
# its port again after every kill, and a port of the range could be taken
# in between. Where the range leaves no room below it, the kernel chooses.
freeport() {
  python3 - <<'PY'
import random, socket
def free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return s.getsockname()[1]
    except OSError:
        return None
    finally:
        s.close()
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 0
port = None
if lo - 1 > 10000:
    for _ in range(64):
        port = free(random.randrange(max(10000, lo - 12000), lo))
        if port:
            break
print(port or free(0))
PY
}

(cd "$proj" && go build -o "$work/idemkit" ./cmd/idemkit) || { echo "conformance: cmd/idemkit does not build" >&2; exit 1; }
cp -r "$suite_root/conformance" "$work/conformance" && cp -r "$suite_root/schemas" "$work/schemas" && chmod -R u+w "$work"
# spec/v2 data files the wider families read at SCHEMAS_DIR/../spec/v2.
if [ -d "$suite_root/spec" ]; then cp -r "$suite_root/spec" "$work/spec" && chmod -R u+w "$work/spec"; fi
if ! (cd "$work/conformance" && npm install --no-audit --no-fund --loglevel=error) >"$work/npm.log" 2>&1; then
  tail -20 "$work/npm.log" >&2; echo "conformance: npm install failed" >&2; exit 1
fi

# lane NAME DEV_FLAGS -- VITEST_ARGS...
lane() {
  local name=$1; shift
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  local port base key_a key_b ready=0
  # Each lane runs the suite from its own tree (hard links to the copy):
  # vitest keeps a results cache under the suite's folder.
  local root="$work/lanes/$name"
  mkdir -p "$root" && cp -al "$work/conformance" "$work/schemas" "$root/" || return 1
  if [ -d "$work/spec" ]; then cp -al "$work/spec" "$root/" || return 1; fi
  port=$(freeport)
  base="http://127.0.0.1:$port"
  key_a="idk_conf_a_$(python3 -c 'import secrets;print(secrets.token_hex(16))')"
  key_b="idk_conf_b_$(python3 -c 'import secrets;print(secrets.token_hex(16))')"
  "$work/idemkit" dev --addr "127.0.0.1:$port" --api-key "$key_a=tenant-a" --api-key "$key_b=tenant-b" \
    --allow-loopback-webhooks "${flags[@]}" >"$work/$name.dev.log" 2>&1 &
  local dev_pid=$!
  echo "$dev_pid" >"$work/$name.dev.pid"
  for _ in $(seq 1 240); do
    kill -0 "$dev_pid" 2>/dev/null || break
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/.well-known/openwop")" = 200 ] && { ready=1; break; }
    sleep 0.5
  done
  if [ "$ready" != 1 ]; then
    tail -20 "$work/$name.dev.log" >&2
    echo "conformance: idemkit dev ($name) not ready" >&2
    stop_dev "$dev_pid"
    return 1
  fi
  rm -f "$work/$name.jsonl"
  # --no-isolate: the lane's test files share one module graph instead of
  # each importing and transforming the suite's modules afresh. Measured on
  # one lane at a time (5 December 2026, quiet machine): the same
  # dispositions, test by test, with 4-5 s of CPU instead of 25 s, and
  # 15-35 s instead of 30-50 s. The scenarios, their timeouts and the
  # server are unchanged; the public runner (run.sh) keeps vitest's default.
  (cd "$root/conformance" && \
    OPENWOP_BASE_URL="$base" OPENWOP_API_KEY="$key_a" OPENWOP_TARGET_MAJOR=2 \
    OPENWOP_IMPLEMENTATION_NAME=idemkit OPENWOP_IMPLEMENTATION_VERSION="$(cd "$proj" && git rev-parse --short HEAD 2>/dev/null || echo dev)" \
    OWC_RESULTS="$work/$name.jsonl" OWC_VITEST_JSON="$work/$name.vitest.json" \
    ./node_modules/.bin/vitest run --config local/vitest.config.ts --no-isolate "$@") >"$work/$name.vitest.log" 2>&1
  stop_dev "$dev_pid"
  rm -f "$work/$name.dev.pid"
  echo "== conformance lane $name (idemkit dev ${flags[*]})"
  node "$work/conformance/local/summarize.mjs" "$work/$name.jsonl" "$work/$name.vitest.json" | tee "$work/$name.out"
  # A lane with a failure keeps what the host said about it: the end of
  # its dev log (run decisions, restarts), since the folder is removed on
  # exit; the banner's example command, which shows the lane's API key, is
  # left out.
  if ! tail -1 "$work/$name.out" | grep -q ' 0 failed$'; then
    echo "---- conformance lane $name: the last 300 lines of its idemkit dev log"
    tail -300 "$work/$name.dev.log" | grep -v 'Authorization: Bearer'
  fi
}

# The lanes run at once, each against its own idemkit dev (and its own
# engine): their scenarios spend most of their time waiting on runs and
# timers, so one after another they left the machine mostly idle (the
# first three lanes took about 110 s on a quiet two-core machine, against
# the longest lane's 50 s). Each lane's output is printed whole once all
# have ended, in this order.
lanes=(default moto dynalite seams in-flight)
lane default -- >"$work/default.lane.log" 2>&1 &
lane moto --emulator moto -- >"$work/moto.lane.log" 2>&1 &
lane dynalite --emulator dynalite -- >"$work/dynalite.lane.log" 2>&1 &
lane seams --conformance-seams -- >"$work/seams.lane.log" 2>&1 &
lane in-flight --idempotency-wait 200ms -- src/scenarios/v2-idempotency-in-flight.test.ts >"$work/in-flight.lane.log" 2>&1 &
wait
for name in "${lanes[@]}"; do cat "$work/$name.lane.log"; done
python3 "$proj/scripts/conformance_verdict.py" "$work/conformance/scenario-majors.json" \
  "default=$work/default.out" "moto=$work/moto.out" "dynalite=$work/dynalite.out" \
  "seams=$work/seams.out" "in-flight=$work/in-flight.out"
