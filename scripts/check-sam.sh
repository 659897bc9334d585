#!/usr/bin/env bash
# Offline SAM checks: cfn-lint on template.yaml and on the copy-paste
# templates for library users (docs/DEPLOYING.md), in one run (its start-up
# costs more than a template's check); then the installed SAM translator
# transforms template.yaml and the least-privilege checks run
# (scripts/check_sam.py); then samconfig.toml is checked against the
# template (scripts/check_samconfig.py); then the copy-paste templates get
# the translator's function checks (scripts/check_snippet.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cfn-lint template.yaml docs/idempotency-table.yaml docs/effects-table.yaml
python3 scripts/check_sam.py template.yaml
python3 scripts/check_samconfig.py samconfig.toml template.yaml
python3 scripts/check_snippet.py docs/idempotency-table.yaml docs/effects-table.yaml
