# Shared by the opt-in scripts: build the release binary and start a `relay serve` with accounts on.
# Sets RELAY_PID, RELAY_URL and RELAY_DIR; the caller stops it with stop_relay.
# RELAY_SKIP_BUILD=1 uses target/release/relay as it is (say, while another build holds the lock);
# RELAY_EXTRA_TOML is appended to the configuration. RELAY_BIN runs another binary (a debug build).
# RELAY_STORE=postgres keeps both stores in a fresh database on the shared PostgreSQL
# (RELAY_PG, default postgres://postgres@127.0.0.1:5432), dropped again by stop_relay;
# the default, sqlite, keeps them in a file in a temporary directory.

repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

start_relay() {
  local root; root=$(repo_root)
  local bin=${RELAY_BIN:-$root/target/release/relay}
  [ -n "${RELAY_SKIP_BUILD:-}" ] || [ -n "${RELAY_BIN:-}" ] || (cd "$root" && cargo build --release -p relay >/dev/null)
  RELAY_DIR=$(mktemp -d)
  local store_url="sqlite://$RELAY_DIR/relay.db"
  case "${RELAY_STORE:-sqlite}" in
    sqlite) ;;
    postgres)
      RELAY_PG_DB="relay_script_$(date +%s)_$$"
      psql -q "${RELAY_PG:-postgres://postgres@127.0.0.1:5432}/postgres" -c "CREATE DATABASE $RELAY_PG_DB"
      store_url="${RELAY_PG:-postgres://postgres@127.0.0.1:5432}/$RELAY_PG_DB" ;;
    *) echo "RELAY_STORE must be sqlite or postgres"; exit 1 ;;
  esac
  cat >"$RELAY_DIR/relay.toml" <<TOML
bind = "127.0.0.1:0"
[memory]
url = "$store_url"
[auth]
url = "$store_url"
default_limit = -1
[limits]
agent_per_minute = 1000000
agent_burst = 100000
suggest_per_minute = 1000000
suggest_burst = 100000
signin_failures = 100000
${RELAY_EXTRA_TOML:-}
TOML
  env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY -u GEMINI_API_KEY RELAY_LOG=warn,relay=info \
    "$bin" --config "$RELAY_DIR/relay.toml" serve >"$RELAY_DIR/serve.log" 2>&1 &
  RELAY_PID=$!
  for _ in $(seq 200); do
    RELAY_URL=$(grep -oE 'listening on [0-9.:]+' "$RELAY_DIR/serve.log" | awk '{print "http://"$3}') || true
    [ -n "${RELAY_URL:-}" ] && break
    sleep 0.05
  done
  [ -n "${RELAY_URL:-}" ] || { echo "relay did not start"; cat "$RELAY_DIR/serve.log"; exit 1; }
}

stop_relay() {
  kill -TERM "$RELAY_PID" 2>/dev/null || true
  wait "$RELAY_PID" 2>/dev/null || true
  if [ -n "${RELAY_PG_DB:-}" ]; then
    psql -q "${RELAY_PG:-postgres://postgres@127.0.0.1:5432}/postgres" -c "DROP DATABASE IF EXISTS $RELAY_PG_DB" || true
  fi
}

# Prints a fresh token for a new unlimited user.
new_token() {
  curl -sf "$RELAY_URL/v1/auth/signup" -H 'content-type: application/json' \
    -d "{\"email\":\"user$RANDOM$RANDOM@example.com\",\"password\":\"long enough password\"}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
