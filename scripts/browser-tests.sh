#!/usr/bin/env bash
# The console and the reference page in real Chromium (Debian's /usr/bin/chromium), driven by
# playwright-core from npm (no browser download). Starts the real relay binary on free ports.
#
# Needs: chromium (apt-get install -y chromium), node and npm. Without Chromium the tests are
# skipped with a message, except under CI=true, where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."

chromium_bin=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium_bin" ] || ! command -v node >/dev/null; then
  if [ "${CI:-}" = "true" ]; then
    echo "browser tests: no Chromium at $chromium_bin or no node; CI must run them (apt-get install -y chromium nodejs npm)"
    exit 1
  fi
  echo "browser tests: SKIPPED, no Chromium at $chromium_bin or no node (apt-get install -y chromium)"
  exit 0
fi

cargo build -p relay
export RELAY_BIN="$PWD/target/debug/relay" CHROMIUM="$chromium_bin"
cd tests/browser
[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund
npm test
