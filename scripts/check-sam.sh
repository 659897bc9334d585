#!/usr/bin/env bash
# Offline SAM checks: cfn-lint, then the installed SAM translator transforms
# template.yaml and the least-privilege checks run (scripts/check_sam.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cfn-lint template.yaml
python3 scripts/check_sam.py template.yaml
