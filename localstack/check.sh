#!/usr/bin/env bash
# CI check of the LocalStack init hook: run it against moto_server (started
# here on a free loopback port) through the aws CLI's --endpoint-url, then
# verify every table of template.yaml exists with its stream and TTL, and
# that a second run is a no-op. Needs moto_server, the aws CLI and PyYAML.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in moto_server aws python3; do
  command -v "$tool" >/dev/null || { echo "localstack/check.sh: $tool is not installed" >&2; exit 1; }
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
log=$(mktemp)
moto_server -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; wait "$moto_pid" 2>/dev/null || true; rm -f "$log"' EXIT

export AWS_ACCESS_KEY_ID=idemkit AWS_SECRET_ACCESS_KEY=idemkit AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
endpoint="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  aws --endpoint-url "$endpoint" dynamodb list-tables >/dev/null 2>&1 && break
  kill -0 "$moto_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done

export IDEMKIT_TEMPLATE="$PWD/template.yaml" IDEMKIT_DYNAMODB_ENDPOINT="$endpoint" IDEMKIT_TABLE_PREFIX=ci-
sh localstack/init/ready.d/10-idemkit-tables.sh
second=$(sh localstack/init/ready.d/10-idemkit-tables.sh)   # idempotent: every table kept
[ "$(printf '%s\n' "$second" | grep -c '(exists)')" -ge 5 ] || { echo "second run: $second" >&2; exit 1; }

expected=$(python3 - <<'PY'
import sys
sys.path.insert(0, "localstack")
import yaml, create_tables
t = yaml.load(open("template.yaml"), Loader=create_tables.Loader)
print(" ".join(sorted(k for k, v in t["Resources"].items() if v["Type"] in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"))))
PY
)
passed=0 failed=0
check() { if "$@"; then passed=$((passed + 1)); else echo "FAIL: $*" >&2; failed=$((failed + 1)); fi; }
has_stream() { aws --endpoint-url "$endpoint" dynamodb describe-table --table-name "$1" --query 'Table.StreamSpecification.StreamEnabled' --output text | grep -q True; }
has_ttl() { aws --endpoint-url "$endpoint" dynamodb describe-time-to-live --table-name "$1" --query 'TimeToLiveDescription.AttributeName' --output text | grep -q expiresAt; }
has_gsi() { aws --endpoint-url "$endpoint" dynamodb describe-table --table-name "$1" --query 'Table.GlobalSecondaryIndexes[].IndexName' --output text | grep -q byRun; }
exists() { aws --endpoint-url "$endpoint" dynamodb describe-table --table-name "$1" >/dev/null; }
for id in $expected; do check exists "ci-$id"; done
for id in IdempotencyTable RunsTable EffectsTable; do check has_stream "ci-$id"; done
for id in IdempotencyTable RunsTable EffectsTable FenceTable; do check has_ttl "ci-$id"; done
check has_gsi ci-EffectsTable
echo "localstack init hook against moto: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
