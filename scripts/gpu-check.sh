#!/usr/bin/env bash
# The one command a GPU owner runs: configure for the local GPU, build, run every test (GPU tests
# included), run compute-sanitizer over the conformance suite, and run kc-bench on the documented
# shapes, writing the tables to docs/benchmarks/<gpu>/. Logs go to one folder (first argument,
# default ./gpu-check-<UTC time>).
#
#   scripts/gpu-check.sh [OUT_DIR]
#
# Environment knobs:
#   KC_BENCH_FILTER=REGEX   benchmark only matching kernels (default: all)
#   KC_BENCH_ARGS="..."     extra kc-bench arguments
#   KC_SKIP_TESTS=1 KC_SKIP_SANITIZER=1 KC_SKIP_BENCH=1
#   KC_BUILD_DIR=DIR        build folder (default build/gpu-check)
#   KC_RUN_TUNER=1          also run kc-sgemm-tune (stage 1, rung 10's search) before the bench
#   KC_SKIP_PEERS=1         do not time the PyTorch peers (bench/peers/torch_peers.py)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}"
build="${KC_BUILD_DIR:-$root/build/gpu-check}"
mkdir -p "$out"
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
{ nvidia-smi || true; nvcc --version; cmake --version | head -n 1; } 2>&1 | tee "$out/machine.txt"

step "configure + build for the local GPU"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA_ARCH=auto \
  -DKC_PTXAS_VERBOSE=ON > "$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
start=$(date +%s)
cmake --build "$build" > "$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
grep -E "spill|Used [0-9]+ registers" "$out/build.log" | sort | uniq -c | sort -rn | head -n 5 || true
grep -E "[1-9][0-9]* bytes spill" "$out/build.log" > "$out/spills.txt" || true

if [ -z "${KC_SKIP_TESTS:-}" ]; then
  step "ctest (GPU tests included)"
  ctest --test-dir "$build" --output-on-failure --output-junit "$out/ctest.xml" > "$out/ctest.log" 2>&1 || status=1
  tail -n 25 "$out/ctest.log"
  grep -E "Skipped|\(Failed\)|Not Run" "$out/ctest.log" | head -n 40 || true
fi

if [ -z "${KC_SKIP_SANITIZER:-}" ] && command -v compute-sanitizer >/dev/null 2>&1; then
  for tool in memcheck racecheck; do
    step "compute-sanitizer $tool over the conformance suite (one seed, problems up to 2^28 MACs)"
    for exe in "$build"/tests/kc_conformance_stage*; do
      [ -x "$exe" ] || continue
      "$exe" --gtest_list_tests | grep -q "^  " || continue  # a stage with no kernels yet
      KC_CONFORMANCE_SEEDS=1 KC_CONFORMANCE_MAX_WORK=268435456 \
        compute-sanitizer --tool "$tool" --error-exitcode 3 "$exe" >> "$out/$tool.log" 2>&1 \
        || { status=1; echo "$tool: $(basename "$exe") reported errors"; }
    done
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$out/$tool.log" | sort | uniq -c
  done
fi

if [ -n "${KC_RUN_TUNER:-}" ]; then
  step "kc-sgemm-tune: rung 10's search space"
  "$build/stage1-sgemm/kc-sgemm-tune" --json "$out/sgemm_tune.json" > "$out/sgemm_tune.log" 2>&1 || status=1
  tail -n 30 "$out/sgemm_tune.log"
fi

peers=()
if [ -z "${KC_SKIP_BENCH:-}" ] && [ -z "${KC_SKIP_PEERS:-}" ] && python3 -c "import torch" 2>/dev/null; then
  step "PyTorch peers (bench/peers/torch_peers.py)"
  if python3 "$root/bench/peers/torch_peers.py" --out "$out/peers.tsv" > "$out/peers.log" 2>&1; then
    peers=(--peers "$out/peers.tsv")
  else
    status=1
  fi
  tail -n 20 "$out/peers.log"
fi

if [ -z "${KC_SKIP_BENCH:-}" ]; then
  step "kc-bench on the documented shapes"
  # shellcheck disable=SC2086
  "$build/bench/kc-bench" ${KC_BENCH_FILTER:+--filter "$KC_BENCH_FILTER"} "${peers[@]}" --markdown \
    --benchmark_out="$out/benchmark.json" --benchmark_out_format=json ${KC_BENCH_ARGS:-} \
    > "$out/kc-bench.log" 2>&1 || status=1
  sed -n '/^kernel  /,$p' "$out/kc-bench.log" | tail -n 80
  grep -E "^wrote" "$out/kc-bench.log" || true
fi

step "done (status $status); logs in $out"
exit $status
