#!/usr/bin/env bash
# Fuzzes Ladder's parsers with cargo-fuzz (libFuzzer): each target for FUZZ_SECONDS seconds
# (default 20). Exits non-zero when a target crashes (a panic, a failed round-trip assertion,
# or a sanitizer report); the crashing input is left in fuzz/artifacts/<target>/ and libFuzzer
# prints how to reproduce it.
#
#   fuzz/run.sh                    # every target, 20 s each
#   FUZZ_SECONDS=300 fuzz/run.sh post_order
#
# Only a stable toolchain is needed: cargo-fuzz passes nightly-only flags (-Zsanitizer=address,
# -Cpasses=sancov-module...), which RUSTC_BOOTSTRAP=1 lets the stable compiler accept.
# The seed corpus in fuzz/corpus/<target>/ is only read: what the fuzzer adds goes to
# fuzz/target/corpus/<target>/ (ignored by git, kept between runs on one machine).
set -euo pipefail
cd "$(dirname "$0")"

seconds="${FUZZ_SECONDS:-20}"
cargo_fuzz_version="${CARGO_FUZZ_VERSION:-0.13.2}"
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=(http_request post_order ws_subscribe replication_handshake engine_commands bundler_request)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz $cargo_fuzz_version"
  cargo install cargo-fuzz --locked --version "$cargo_fuzz_version"
fi

export RUSTC_BOOTSTRAP=1
# -a: debug assertions (and so overflow checks) on, as in the tests.
fuzz_flags=(--debug-assertions)

echo "== cargo fuzz build (${targets[*]})"
for target in "${targets[@]}"; do
  cargo fuzz build "${fuzz_flags[@]}" "$target"
done

status=0
for target in "${targets[@]}"; do
  case "$target" in
    http_request) dict=dict/http_request.dict max_len=20000 ;;
    replication_handshake) dict=dict/replication.dict max_len=4096 ;;
    engine_commands) dict=dict/engine.dict max_len=4096 ;;
    *) dict=dict/json.dict max_len=4096 ;;
  esac
  scratch="target/corpus/$target"
  log="target/logs/$target.log"
  mkdir -p "$scratch" "artifacts/$target" target/logs
  echo "== cargo fuzz run $target (${seconds}s; full log in fuzz/$log)"
  if cargo fuzz run "${fuzz_flags[@]}" "$target" "$scratch" "corpus/$target" -- \
    -max_total_time="$seconds" -dict="$dict" -max_len="$max_len" -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1; then
    grep -E '^(Done|stat::(number_of_executed_units|average_exec_per_sec|new_units_added))' "$log" || true
  else
    # From the panic or sanitizer report on: the message, the failing input, how to reproduce.
    first=$(grep -n -m1 -E 'panicked at|ERROR: (AddressSanitizer|libFuzzer)' "$log" | cut -d: -f1)
    sed -n "${first:-1},\$p" "$log" | grep -v -E '^#[0-9]+' | tail -n 150 >&2
    echo "!! $target crashed: the input is in fuzz/artifacts/$target/" >&2
    status=1
  fi
done
exit "$status"
