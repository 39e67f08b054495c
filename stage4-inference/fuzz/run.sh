#!/usr/bin/env bash
# Builds the stage-4 reader fuzzers (preset `fuzz`: clang, libFuzzer, ASan + UBSan, host code only)
# and runs each for a bounded number of executions over its committed corpus.
#
#   stage4-inference/fuzz/run.sh [RUNS] [SECONDS] [TARGET...]
#
# RUNS (default 1000000) executions per target, stopping early after SECONDS (default 600) of
# fuzzing. New inputs the fuzzer finds go to build/fuzz/corpus/<target>/, never into the committed
# corpus; a crash, sanitizer report, uncaught non-kc::Error exception or timeout stops the run with
# the input saved as build/fuzz/artifacts/<target>/crash-* (or timeout-*, oom-*), and the script
# exits non-zero. To fold new finds into the committed corpus (kept small):
#   build/fuzz/stage4-inference/fuzz/<target> -merge=1 stage4-inference/fuzz/corpus/<target> \
#       build/fuzz/corpus/<target>
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
runs="${1:-1000000}"
seconds="${2:-600}"
shift $(( $# > 2 ? 2 : $# ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  targets=(fuzz_gguf fuzz_safetensors fuzz_model_config fuzz_tokenizer_json fuzz_tokenizer_encode fuzz_request_json
           fuzz_int4_checkpoint)

# Configure once; later builds re-run CMake themselves when a CMakeLists changes.
[ -f build/fuzz/build.ninja ] || cmake --preset fuzz >/dev/null
cmake --build build/fuzz --target "${targets[@]}"

fuzz_dir=stage4-inference/fuzz
status=0
for target in "${targets[@]}"; do
  work="build/fuzz/corpus/$target"
  artifacts="build/fuzz/artifacts/$target"
  mkdir -p "$work" "$artifacts"
  dict=()
  case "$target" in
    fuzz_gguf) dict=(-dict="$fuzz_dir/gguf.dict") ;;
    fuzz_safetensors | fuzz_model_config | fuzz_tokenizer_json | fuzz_request_json | fuzz_int4_checkpoint)
      dict=(-dict="$fuzz_dir/json.dict") ;;
  esac
  start=$(date +%s)
  # -timeout: one input running 10 s is a hang; -rss_limit_mb / -malloc_limit_mb: a reader
  # that reserves memory a small input cannot justify is a finding too.
  if ! "build/fuzz/$fuzz_dir/$target" "$work" "$fuzz_dir/corpus/$target" "${dict[@]}" \
      -runs="$runs" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/" \
      2> "build/fuzz/$target.log"; then
    status=1
    tail -n 40 "build/fuzz/$target.log"
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build/fuzz/$target.log" |
               grep -o '[0-9]*$' || echo "?")
  echo "$target: $executions executions in $(( $(date +%s) - start )) s (log: build/fuzz/$target.log)"
done
exit $status
