#!/bin/sh
# LocalStack init hook (ready stage): create idemkit's tables from the
# mounted template.yaml. LocalStack runs it inside the container, where the
# aws CLI is awslocal's backend and the edge endpoint is localhost:4566.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python3 "$here/../../create_tables.py" \
  --template "${IDEMKIT_TEMPLATE:-/opt/idemkit/template.yaml}" \
  --endpoint-url "${IDEMKIT_DYNAMODB_ENDPOINT:-http://localhost:4566}" \
  --region "${AWS_DEFAULT_REGION:-us-east-1}" \
  --prefix "${IDEMKIT_TABLE_PREFIX:-idemkit-}"
