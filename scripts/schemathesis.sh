#!/usr/bin/env bash
# Opt-in API fuzzing: schemathesis (PyPI) against /openapi.json with a signed-in user.
# Passes when it reports no server error and no response outside the documented schema.
# Usage: [RELAY_STORE=sqlite|postgres] scripts/schemathesis.sh [MAX_EXAMPLES]   (default 100 per operation)
# RELAY_STORE picks the backend both stores use (scripts/lib.sh); each store's results are kept apart.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
venv="$here/.venv"
[ -x "$venv/bin/st" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q schemathesis; }
# A stand-in SearXNG on a free port, so /v1/search runs its whole path instead of answering the
# documented 503 `search_unavailable` (which schemathesis counts as a server error).
search_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$search_port" <<'PY' &
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        q = parse_qs(urlparse(self.path).query).get("q", [""])[0]
        body = json.dumps({"results": [{"title": "Result for " + q, "url": "https://example.com/", "content": "text"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
search_pid=$!
export RELAY_EXTRA_TOML="[search]
kind = \"searxng\"
base_url = \"http://127.0.0.1:$search_port\""
start_relay
trap 'stop_relay; kill $search_pid 2>/dev/null || true' EXIT
token=$(new_token)
"$venv/bin/st" --version
# Signout is left out: it would revoke the run's own token, and every later call would only
# prove that a revoked token gets 401. positive_data_acceptance (ST202) is left out: the agent
# leg's rules across messages (a tool result must answer an earlier call of the same leg, a user
# message needs content) cannot be written in JSON Schema, so it reports legs the schema allows and
# validation rightly refuses. Every other check runs: no 5xx, every status, header, content type and
# body as documented, and schema-invalid requests refused.
"$venv/bin/st" run "$RELAY_URL/openapi.json" \
  --header "Authorization: Bearer $token" \
  --checks all \
  --exclude-checks positive_data_acceptance \
  --exclude-path /v1/auth/signout \
  --max-examples "${1:-100}" \
  --seed 42 \
  --report junit --report-dir "$here/results/${RELAY_STORE:-sqlite}" \
  2>&1 | tee "$here/results-schemathesis-${RELAY_STORE:-sqlite}.txt"
