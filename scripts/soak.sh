#!/usr/bin/env bash
# Opt-in soak: 200 agent legs a second (demo provider, accounts on) for DURATION, sampling the
# process's RSS and open file descriptors every 5 s; prints the samples and the growth.
# Usage: scripts/soak.sh [DURATION_SECONDS]   (default 600). Needs oha (cargo install oha --locked).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
duration=${1:-600}
command -v oha >/dev/null 2>&1 || cargo install oha --locked
start_relay
trap stop_relay EXIT
token=$(new_token)
sample() {
  local rss fds
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$RELAY_PID/status")
  fds=$(ls "/proc/$RELAY_PID/fd" | wc -l)
  echo "$1 $rss $fds"
}
body='{"messages":[{"role":"user","content":"hello"}],"project_id":"soak"}'
oha --no-tui --output-format json -q 200 -z "${duration}s" -m POST \
  -H "Authorization: Bearer $token" -H 'content-type: application/json' -d "$body" \
  "$RELAY_URL/v1/agent/stream" >"$RELAY_DIR/oha.json" &
load=$!
samples="$RELAY_DIR/samples.txt"
start=$(date +%s)
while kill -0 "$load" 2>/dev/null; do
  sample $(( $(date +%s) - start )) >>"$samples"
  sleep 5
done
wait "$load"
sample $(( $(date +%s) - start )) >>"$samples"
echo "seconds rss_kib open_fds"
cat "$samples"
python3 - "$samples" "$RELAY_DIR/oha.json" <<'PY'
import json, sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
warm = rows[min(2, len(rows) - 1)]  # after the first 10 s: allocator and pools warmed up
last = rows[-1]
r = json.load(open(sys.argv[2]))
summary = r.get("summary", {})
codes = r.get("statusCodeDistribution", {})
print(f"requests: {sum(codes.values())}, status codes: {codes}, success rate: {summary.get('successRate')}")
print(f"rss: {warm[1]} KiB at {warm[0]} s -> {last[1]} KiB at {last[0]} s: growth {last[1] - warm[1]} KiB")
print(f"open fds: {warm[2]} -> {last[2]}: growth {last[2] - warm[2]}")
PY
