#!/usr/bin/env bash
# Opt-in fuzzing: runs each cargo-fuzz target for SECONDS (default 60) and prints its executions.
# Usage: fuzz/run.sh [SECONDS] [TARGET…]
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(provider_stream request_body suggest_safety)
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
mkdir -p results
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  # The machine's only toolchain is stable: RUSTC_BOOTSTRAP lets cargo-fuzz pass its -Z flags, and
  # without a sanitizer runtime the targets still get coverage guidance, panics and timeouts.
  RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$t" "corpus/$t" -- \
    -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    >"results/$t.log" 2>&1 || { echo "$t: FAILED (see fuzz/results/$t.log)"; tail -30 "results/$t.log"; exit 1; }
  runs=$(grep -E '^stat::number_of_executed_units' "results/$t.log" | awk '{print $2}')
  cov=$(grep -E '^#[0-9]+' "results/$t.log" | tail -1 | grep -oE 'cov: [0-9]+' || true)
  echo "$t: ${runs:-?} executions in ${secs}s, no crash, no timeout (${cov:-cov: ?})"
done
