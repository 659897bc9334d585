#!/usr/bin/env bash
# CI check of the LocalStack init hook: run it against moto_server (started
# here on a free loopback port) through the aws CLI's --endpoint-url, then
# verify every table of template.yaml exists with its stream and TTL, and
# that a second run is a no-op. Needs moto_server, the aws CLI, curl and
# PyYAML.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in moto_server aws python3 curl; do
  command -v "$tool" >/dev/null || { echo "localstack/check.sh: $tool is not installed" >&2; exit 1; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "localstack/check.sh: PyYAML is not installed for python3 (pip install pyyaml)" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
log=$(mktemp)
moto_server -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; wait "$moto_pid" 2>/dev/null || true; rm -f "$log"' EXIT

export AWS_ACCESS_KEY_ID=idemkit AWS_SECRET_ACCESS_KEY=idemkit AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
endpoint="http://127.0.0.1:$port"
# Ready when moto answers HTTP at all (curl, not an aws CLI start per poll).
for _ in $(seq 1 300); do
  curl -s -o /dev/null "$endpoint/" && break
  kill -0 "$moto_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
aws --endpoint-url "$endpoint" dynamodb list-tables >/dev/null

export IDEMKIT_TEMPLATE="$PWD/template.yaml" IDEMKIT_DYNAMODB_ENDPOINT="$endpoint" IDEMKIT_TABLE_PREFIX=ci-
sh localstack/init/ready.d/10-idemkit-tables.sh
second=$(sh localstack/init/ready.d/10-idemkit-tables.sh)   # idempotent: every table kept
[ "$(printf '%s\n' "$second" | grep -c '(exists)')" -ge 5 ] || { echo "second run: $second" >&2; exit 1; }

# Without the aws CLI, or without PyYAML, create_tables.py says what is
# missing in one line (exit 1), never a Python traceback.
py=$(python3 -c 'import sys; print(sys.executable)')
bare=$(mktemp -d)
ln -s "$py" "$bare/python3"
for missing in aws yaml; do
  if [ "$missing" = aws ]; then
    out=$(PATH="$bare" "$py" localstack/create_tables.py --endpoint-url "$endpoint" 2>&1) && rc=0 || rc=$?
  else
    out=$("$py" -c 'import runpy, sys; sys.modules["yaml"] = None; sys.argv = ["create_tables.py", "--endpoint-url", sys.argv[1]]; runpy.run_path("localstack/create_tables.py", run_name="__main__")' "$endpoint" 2>&1) && rc=0 || rc=$?
  fi
  if [ "$rc" != 1 ] || [ "$(printf '%s\n' "$out" | wc -l)" != 1 ] || ! printf '%s' "$out" | grep -q "is not installed"; then
    echo "create_tables.py without $missing: exit $rc, want 1 and one line saying what is not installed:" >&2
    printf '%s\n' "$out" >&2
    rm -rf "$bare"; exit 1
  fi
done
rm -rf "$bare"

# The checks of the tables the hook made, in one Python process: through
# botocore (the library the aws CLI v1 runs on) rather than one aws CLI
# start per check; where python3 has no botocore (the aws CLI v2 bundles
# its own), through the aws CLI, one call per table and question.
python3 - "$endpoint" <<'PY'
import functools, json, subprocess, sys
sys.path.insert(0, "localstack")
import yaml, create_tables
t = yaml.load(open("template.yaml"), Loader=create_tables.Loader)
expected = sorted(k for k, v in t["Resources"].items() if v["Type"] in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"))
endpoint = sys.argv[1]
try:
    import botocore.session
    ddb = botocore.session.get_session().create_client("dynamodb", endpoint_url=endpoint)
    describe_table = lambda n: ddb.describe_table(TableName=n)
    describe_ttl = lambda n: ddb.describe_time_to_live(TableName=n)
except ImportError:
    def aws(*args):
        out = subprocess.run(["aws", "--endpoint-url", endpoint, "--output", "json", "dynamodb", *args],
                             check=True, capture_output=True, text=True)
        return json.loads(out.stdout)
    describe_table = lambda n: aws("describe-table", "--table-name", n)
    describe_ttl = lambda n: aws("describe-time-to-live", "--table-name", n)
describe_table = functools.lru_cache(describe_table)
passed = failed = 0
def check(what, name, fn):
    global passed, failed
    try:
        ok = fn(name)
    except Exception as e:
        print(f"{what} {name}: {e}", file=sys.stderr)
        ok = False
    if ok:
        passed += 1
    else:
        print(f"FAIL: {what} {name}", file=sys.stderr)
        failed += 1
exists = lambda n: bool(describe_table(n)["Table"])
has_stream = lambda n: describe_table(n)["Table"].get("StreamSpecification", {}).get("StreamEnabled") is True
has_ttl = lambda n: "expiresAt" in (describe_ttl(n)["TimeToLiveDescription"].get("AttributeName") or "")
has_gsi = lambda n: any("byRun" in g["IndexName"] for g in describe_table(n)["Table"].get("GlobalSecondaryIndexes", []))
for id in expected:
    check("exists", "ci-" + id, exists)
for id in ("IdempotencyTable", "RunsTable", "EffectsTable"):
    check("has_stream", "ci-" + id, has_stream)
for id in ("IdempotencyTable", "RunsTable", "EffectsTable", "FenceTable"):
    check("has_ttl", "ci-" + id, has_ttl)
check("has_gsi", "ci-EffectsTable", has_gsi)
print(f"localstack init hook against moto: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
