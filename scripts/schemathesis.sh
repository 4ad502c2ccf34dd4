#!/usr/bin/env bash
# Opt-in API fuzzing: schemathesis (PyPI) against /openapi.json with a signed-in user.
# Passes when it reports no server error and no response outside the documented schema.
# Usage: scripts/schemathesis.sh [MAX_EXAMPLES]   (default 100 per operation)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
venv="$here/.venv"
[ -x "$venv/bin/st" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q schemathesis; }
start_relay
trap stop_relay EXIT
token=$(new_token)
"$venv/bin/st" --version
"$venv/bin/st" run "$RELAY_URL/openapi.json" \
  --header "Authorization: Bearer $token" \
  --checks all \
  --max-examples "${1:-100}" \
  --seed 42 \
  --report junit --report-dir "$here/results" \
  2>&1 | tee "$here/results-schemathesis.txt"
