#!/usr/bin/env bash
# The one command behind BENCHMARKS.md: builds Relay and the harness in release mode, installs the
# load generator (oha, from crates.io) and the LiteLLM proxy (from PyPI, into bench/.venv) when they
# are missing, raises the open-file limit for the open-stream test, runs the harness, and writes
# bench/results/latest.md (the table) and bench/results/latest.json (every figure).
#
#   bench/run.sh            the full run (about 20 minutes, plus the first-time installs)
#   bench/run.sh --smoke    the tiny version: seconds, no LiteLLM, checks the pipeline only
#   bench/run.sh --stage NAME [ARGS...]
#                           one stage only, its figures as JSON on standard output: `ledger`
#                           (ledger on/off: p99 and CPU per leg at --rate, --max for the highest
#                           rate held), `doors` (Claude Code-sized /v1/messages calls beside the
#                           bare proxy), `cache`, `usage-query`, `streams`, `inject`, `profile`;
#                           `relay-bench NAME --help` lists each one's options
#
# Environment: CARGO_TARGET_DIR (default: the workspace's target/), BENCH_WAIT_LOAD=1 to wait (up to
# 15 minutes) for the 1-minute load average to drop under 1.5 before measuring, RELAY_BENCH_PG_URL
# for the PostgreSQL rows' server (default postgres://postgres@127.0.0.1:5432/postgres; the harness
# creates a database of its own there and drops it after).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target_dir"

label="bench/run.sh${*:+ $*}"
smoke=0
stage=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --smoke) smoke=1; shift ;;
        --stage) shift; stage=("$@"); break ;;
        *) echo "bench/run.sh: unknown option $1 (--smoke, --stage NAME [ARGS...])" >&2; exit 2 ;;
    esac
done

echo "== building relay and relay-bench (release)" >&2
cargo build --release -p relay -p relay-bench

oha_bin="$(command -v oha || true)"
if [[ -z "$oha_bin" && -x "$HOME/.cargo/bin/oha" ]]; then
    oha_bin="$HOME/.cargo/bin/oha"
fi
if [[ -z "$oha_bin" && "$smoke" == 0 ]]; then
    echo "== installing oha from crates.io (about 5 minutes, once)" >&2
    cargo install oha --locked
    oha_bin="$HOME/.cargo/bin/oha"
fi

litellm_bin="$root/bench/.venv/bin/litellm"
if [[ ! -x "$litellm_bin" && "$smoke" == 0 && ${#stage[@]} -eq 0 ]]; then
    echo "== installing litellm[proxy] from PyPI into bench/.venv (about a minute, once)" >&2
    python3 -m venv "$root/bench/.venv"
    "$root/bench/.venv/bin/pip" install --quiet 'litellm[proxy]'
fi

# Each open stream holds two sockets in Relay: 10,000 streams need more than 20,000 descriptors.
# Raise the hard and soft limits (root with CAP_SYS_RESOURCE may), else the soft one as far as the
# hard limit allows; the harness reads Relay's own limit and reports if it had to open fewer.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "== open-file limit: $(ulimit -Sn) (hard $(ulimit -Hn))" >&2

if [[ "${BENCH_WAIT_LOAD:-0}" == 1 ]]; then
    for _ in $(seq 1 90); do
        load1="$(cut -d' ' -f1 /proc/loadavg)"
        awk -v l="$load1" 'BEGIN { exit !(l < 1.5) }' && break
        echo "== load average $load1: waiting for a quieter machine" >&2
        sleep 10
    done
fi

mkdir -p "$root/bench/results"
args=(--relay-bin "$target_dir/release/relay" --command-label "$label")
[[ -n "$oha_bin" ]] && args+=(--oha "$oha_bin")
if [[ ${#stage[@]} -gt 0 ]]; then
    exec "$target_dir/release/relay-bench" "${args[@]}" --no-litellm "${stage[@]}"
fi
if [[ "$smoke" == 1 ]]; then
    args+=(--smoke --out "$root/bench/results/smoke.md" --json "$root/bench/results/smoke.json")
else
    args+=(--litellm "$litellm_bin" --out "$root/bench/results/latest.md" --json "$root/bench/results/latest.json")
fi
exec "$target_dir/release/relay-bench" "${args[@]}"
