#!/usr/bin/env bash
# gpu-check.sh — the one command a GPU owner runs. It configures and builds kc for the local GPU,
# runs every test (GPU tests included), times the PyTorch peers and runs kc-bench, writing every
# table; with --full it then runs compute-sanitizer over the conformance suite. Every step prints
# its elapsed time, the last line names the steps that failed, and the exit status is 0 only when
# every step that ran passed.
#
#   scripts/gpu-check.sh [--quick] [--full] [--filter REGEX] [--out DIR | DIR]
#
# Modes (run times on an H200, 2026-12-01: the root README's table):
#   (default)  configure + build (all cores), ctest in parallel, the PyTorch peers, then kc-bench
#              once per stage on each op's documented shapes with --markdown: the tables go to
#              docs/benchmarks/<gpu>/ (the committed tables) and are copied to OUT/tables/.
#   --quick    the same build and ctest, then only the headline rows, tables to OUT/tables/:
#                kc-bench --filter '^stage1/sgemm/11_|^stage3/hgemm/09_' --shapes 4096x4096x4096
#                kc-bench --filter '^stage2/(rmsnorm|layernorm|softmax)/' --shapes 32768x4096
#                         --dtype bf16 --peers OUT/peers.tsv
#              (stage 1 rung 11 and stage 3 rung 09 at 4096^3 against cuBLAS; stage 2's RMSNorm,
#              LayerNorm and softmax ladders at 32768x4096 bf16 against the copy baseline and the
#              PyTorch peers, timed for those three ops at that shape only).
#   --full     after everything above (default or --quick), compute-sanitizer memcheck and
#              racecheck over each stage's conformance executable, each split into 4 GoogleTest
#              shards, all runs in parallel, on one seed and on problems whose dimensions
#              multiply to at most 2^20, each run stopped after 600 s. A correctness failure seen under a tool is reported as such, not as a
#              sanitizer finding. (At 2^26 for memcheck and 2^24 for racecheck, stage 2's memcheck
#              and stages 1 and 2's racecheck had not finished after 170 s on an H200.)
#
# Switches:
#   --quick             the headline rows only (above)
#   --full              add the sanitizer passes (above); combines with --quick
#   --filter REGEX      kc-bench only the kernels whose id matches REGEX (e.g. stage2/softmax), on
#                       their documented shapes, in one run, tables to OUT/tables/; replaces the
#                       per-stage runs and the --quick set. Same as KC_BENCH_FILTER.
#   --out DIR, DIR      where logs and tables go (default ./gpu-check-<UTC time>)
#   -h, --help          this text
#
# Environment knobs:
#   KC_BENCH_FILTER=REGEX    as --filter (the switch wins)
#   KC_BENCH_ARGS="..."      extra arguments for every kc-bench run, split on spaces
#                            (e.g. "--benchmark_repetitions=3" or "--solo"; a --shapes here
#                            applies to every run, so pair it with --filter)
#   KC_SKIP_TESTS=1          no ctest
#   KC_SKIP_BENCH=1          no kc-bench and no PyTorch peers
#   KC_SKIP_PEERS=1          no PyTorch peers (bench/peers/torch_peers.py)
#   KC_RUN_TUNER=1           also run kc-sgemm-tune (stage 1, rung 10's search) before kc-bench
#   KC_BUILD_DIR=DIR         build folder (default build/gpu-check)
#   KC_CTEST_JOBS=N          parallel ctest jobs (default: the core count, at most 14; the GPU
#                            tests share the one GPU)
#   KC_TEST_TIMEOUT=S        ctest's per-test time limit in seconds (default 180)
#   KC_SANITIZER_SEEDS=N     --full: conformance seeds per problem (default 1)
#   KC_SANITIZER_MAX_WORK=W  --full: largest problem checked, product of its dimensions (default
#                            1048576 = 2^20 for both tools)
#   KC_SANITIZER_TIMEOUT=S   --full: time limit of each sanitizer run (default 600)
#   KC_SANITIZER_SHARDS=N    --full: each (tool, stage) as N GoogleTest shards run in parallel,
#                            each its own step (default 4)
#
# KC_REQUIRE_GPU=1 is exported for the whole run: a GPU test that cannot reach a GPU (a broken
# driver, a hidden device) fails instead of skipping.
#
# OUT holds: gpu-check.log (everything printed), summary.txt (one line per step), machine.txt,
# configure.log, build.log, spills.txt, ctest.log, ctest.xml (JUnit), ctest-summary.txt,
# peers.tsv, peers.log, bench/*.log and *.json (Google Benchmark JSON), tables/*.md and *.json
# (kc-bench's tables), sanitizer/<tool>-<stage>-shard<i>.log.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }

quick=0
full=0
out=""
filter="${KC_BENCH_FILTER:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --full) full=1 ;;
    --filter=*) filter="${1#*=}" ;;
    --filter)
      [ $# -ge 2 ] || { echo "gpu-check.sh: --filter needs a regular expression" >&2; exit 2; }
      filter="$2"; shift ;;
    --out=*) out="${1#*=}" ;;
    --out)
      [ $# -ge 2 ] || { echo "gpu-check.sh: --out needs a folder" >&2; exit 2; }
      out="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "gpu-check.sh: unknown option '$1'; scripts/gpu-check.sh --help lists the switches" >&2; exit 2 ;;
    *)
      [ -z "$out" ] || { echo "gpu-check.sh: two output folders given ('$out' and '$1')" >&2; exit 2; }
      out="$1" ;;
  esac
  shift
done

out="${out:-$PWD/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out" || { echo "gpu-check.sh: cannot create the output folder '$out'" >&2; exit 2; }
out="$(cd "$out" && pwd)"
build="${KC_BUILD_DIR:-$root/build/gpu-check}"
cores="$(nproc 2>/dev/null || echo 4)"
ctest_jobs="${KC_CTEST_JOBS:-$(( cores < 14 ? cores : 14 ))}"
test_timeout="${KC_TEST_TIMEOUT:-180}"
read -r -a bench_extra <<< "${KC_BENCH_ARGS:-}"
export KC_REQUIRE_GPU=1

# Everything printed also goes to OUT/gpu-check.log. The tee ignores Ctrl-C, so that the summary
# of an interrupted run is still printed and logged.
exec 3>&1 4>&2
exec > >(trap '' INT TERM; exec tee -a "$out/gpu-check.log") 2>&1
tee_pid=$!

# The CUDA tools may not be on PATH on a fresh machine.
for dir in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer; do
  [ -d "$dir" ] && case ":$PATH:" in *":$dir:"*) ;; *) PATH="$PATH:$dir" ;; esac
done
export PATH

# --- steps: each prints its elapsed time; the summary lists them all ---------------------------
step_names=()
step_results=()
step_seconds=()
step_notes=()
current_step=""
step_started=0

seconds_text() {
  local s="$1"
  if [ "$s" -ge 60 ]; then printf '%d min %02d s' $(( s / 60 )) $(( s % 60 )); else printf '%d s' "$s"; fi
}

# begin_step NAME [WHAT]
begin_step() {
  current_step="$1"
  step_started=$SECONDS
  printf '\n=== %s%s  [started %s UTC]\n' "$current_step" "${2:+: $2}" "$(date -u +%H:%M:%S)"
}

# record_step NAME RESULT SECONDS [NOTE]: RESULT is ok, FAILED or skipped.
record_step() {
  step_names+=("$1")
  step_results+=("$2")
  step_seconds+=("$3")
  step_notes+=("${4:-}")
  printf -- '--- %s: %s in %s%s\n' "$1" "$2" "$(seconds_text "$3")" "${4:+ ($4)}"
}

# end_step RESULT [NOTE] closes the step begun last.
end_step() { record_step "$current_step" "$1" $(( SECONDS - step_started )) "${2:-}"; }

# finish: the table of steps, then one line naming the failed steps; exits 0 only if none failed.
finish() {
  local i failed=() skipped=0 last
  for i in "${!step_names[@]}"; do
    [ "${step_results[$i]}" = FAILED ] && failed+=("${step_names[$i]}")
    [ "${step_results[$i]}" = skipped ] && skipped=$(( skipped + 1 ))
  done
  if [ ${#failed[@]} -eq 0 ]; then
    last="gpu-check: every step that ran passed ($(( ${#step_names[@]} - skipped )) steps"
    last="$last$([ "$skipped" -gt 0 ] && echo ", $skipped skipped"); $(seconds_text "$SECONDS"))"
  else
    last="gpu-check: FAILED steps: $(printf '%s, ' "${failed[@]}" | sed 's/, $//')"
    last="$last (${#failed[@]} of ${#step_names[@]} steps; $(seconds_text "$SECONDS") in all)"
  fi
  {
    printf '\n=== summary (%s; outputs in %s)\n' "$mode_text" "$out"
    for i in "${!step_names[@]}"; do
      printf '  %-50s %-8s %13s  %s\n' "${step_names[$i]}" "${step_results[$i]}" \
        "$(seconds_text "${step_seconds[$i]}")" "${step_notes[$i]}"
    done
    echo "$last"
  } > "$out/summary.txt"
  cat "$out/summary.txt"
  exec 1>&3 2>&4 3>&- 4>&-
  wait "$tee_pid" 2>/dev/null
  [ ${#failed[@]} -eq 0 ] && exit 0
  exit 1
}

# Ctrl-C or a kill still prints the summary, with the step that was running marked as such. The
# sanitizer runs go on in the background, so they are stopped by their process ids.
# shellcheck disable=SC2317  # called from the trap below
stop_sanitizers() {
  local file
  for file in "$out"/sanitizer/*.pid; do
    [ -f "$file" ] && [ ! -f "${file%.pid}.status" ] && kill "$(cat "$file")" 2>/dev/null
  done
}
trap 'echo; stop_sanitizers; end_step FAILED "interrupted"; finish' INT TERM

mode_text="default mode"
[ "$quick" = 1 ] && mode_text="--quick"
[ -n "$filter" ] && mode_text="$mode_text, --filter '$filter'"
[ "$full" = 1 ] && mode_text="$mode_text, --full"
echo "gpu-check.sh ($mode_text): source $root, build $build, outputs $out; KC_REQUIRE_GPU=1"

# --- machine ------------------------------------------------------------------------------------
begin_step "machine"
{
  date -u
  nvidia-smi
  nvidia-smi -q -d CLOCK | sed -n '/Max Clocks/,/^$/p'
  nvcc --version
  cmake --version | head -n 1
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'
  [ "$full" = 1 ] && compute-sanitizer --version
} > "$out/machine.txt" 2>&1
if gpus="$(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1)" \
   && [ -n "$gpus" ]; then
  echo "$gpus"
  end_step ok
else
  echo "nvidia-smi: ${gpus:-no output}"
  echo "nvidia-smi lists no GPU (driver not loaded, or no GPU visible): the GPU tests will fail"
  echo "under KC_REQUIRE_GPU=1 and kc-bench will refuse to run; see $out/machine.txt"
  end_step FAILED "no GPU visible to nvidia-smi"
fi

# --- configure + build --------------------------------------------------------------------------
begin_step "configure"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKC_CUDA_ARCH=auto \
     -DKC_PTXAS_VERBOSE=ON > "$out/configure.log" 2>&1; then
  grep -E "^-- kc: " "$out/configure.log"
  end_step ok
else
  tail -n 40 "$out/configure.log"
  end_step FAILED "cmake configure failed; see configure.log"
  finish
fi

begin_step "build" "$cores parallel jobs"
if cmake --build "$build" --parallel "$cores" > "$out/build.log" 2>&1; then
  grep -E "[1-9][0-9]* bytes spill" "$out/build.log" > "$out/spills.txt"
  echo "ptxas: $(wc -l < "$out/spills.txt") kernel reports with register spills (spills.txt)"
  end_step ok
else
  echo "first errors in build.log:"
  grep -E -m 20 "error|Error" "$out/build.log"
  echo "last lines of build.log:"
  tail -n 20 "$out/build.log"
  end_step FAILED "build failed; see build.log"
  finish
fi

# --- tests --------------------------------------------------------------------------------------
if [ -z "${KC_SKIP_TESTS:-}" ]; then
  begin_step "ctest" "-j $ctest_jobs, --timeout $test_timeout s per test"
  ctest --test-dir "$build" -j "$ctest_jobs" --timeout "$test_timeout" --no-tests=error \
    --output-on-failure --output-junit "$out/ctest.xml" \
    --test-output-size-passed 65536 --test-output-size-failed 1048576 > "$out/ctest.log" 2>&1
  ctest_rc=$?
  grep -E "tests passed, .* failed out of" "$out/ctest.log"
  # Passed / skipped (with the reason) / failed (with the message) from the JUnit XML; without
  # python3 or the XML, ctest's own lists of the tests that did not run or failed.
  summary_rc=2
  if [ -s "$out/ctest.xml" ] && command -v python3 > /dev/null 2>&1; then
    python3 "$root/scripts/test_summary.py" ctest "$out/ctest.xml" > "$out/ctest-summary.txt"
    summary_rc=$?
    cat "$out/ctest-summary.txt"
  fi
  if [ "$summary_rc" -eq 2 ]; then
    sed -n '/^The following tests/,$p' "$out/ctest.log"
    note="$(grep -E -o "[0-9]+ tests? failed out of [0-9]+" "$out/ctest.log" || echo "ctest exited with $ctest_rc")"
  else
    note="$(head -n 1 "$out/ctest-summary.txt" | sed 's/^ *//')"
  fi
  if [ "$ctest_rc" -eq 0 ]; then end_step ok "$note"; else end_step FAILED "$note; see ctest.log"; fi
else
  record_step "ctest" skipped 0 "KC_SKIP_TESTS is set"
fi

# --- benchmarks ---------------------------------------------------------------------------------
bench="$build/bench/kc-bench"
peers_args=()

if [ -n "${KC_RUN_TUNER:-}" ]; then
  begin_step "kc-sgemm-tune" "rung 10's search space"
  if "$build/stage1-sgemm/kc-sgemm-tune" --json "$out/sgemm_tune.json" > "$out/sgemm_tune.log" 2>&1; then
    tail -n 30 "$out/sgemm_tune.log"
    end_step ok
  else
    tail -n 30 "$out/sgemm_tune.log"
    end_step FAILED "see sgemm_tune.log"
  fi
fi

# The peers are timed only when kc-bench will run kernels of the ops they cover: stage 2's norms and
# softmax, stage 3's attention and decode attention.
if [ -n "${KC_SKIP_BENCH:-}" ]; then
  :
elif [ -n "${KC_SKIP_PEERS:-}" ]; then
  record_step "PyTorch peers" skipped 0 "KC_SKIP_PEERS is set"
# (grep -c, not grep -q: -q stops reading at the first match, kc-bench dies of SIGPIPE, and under
# pipefail the pipeline fails as if nothing matched.)
elif [ -n "$filter" ] &&
     [ "$("$bench" --list --filter "$filter" 2>/dev/null | grep -cE "^stage2/|^stage3/attention_(fwd|decode_paged)/")" -eq 0 ]; then
  echo; echo "=== PyTorch peers: not needed, --filter '$filter' selects no kernel of an op they time"
else
  begin_step "PyTorch peers" "bench/peers/torch_peers.py"
  peer_set=()
  [ "$quick" = 1 ] && [ -z "$filter" ] && peer_set=(--ops "rmsnorm,layernorm,softmax" --hidden 4096)
  if ! python3 -c "import torch" > /dev/null 2>&1; then
    echo "python3 cannot import torch: the tables will have no PyTorch rows (KC_SKIP_PEERS=1 skips this step)"
    end_step skipped "no PyTorch"
  elif python3 "$root/bench/peers/torch_peers.py" --out "$out/peers.tsv" "${peer_set[@]}" \
         > "$out/peers.log" 2>&1; then
    sed -n '/^op  /,$p' "$out/peers.log"
    peers_args=(--peers "$out/peers.tsv")
    end_step ok
  else
    tail -n 20 "$out/peers.log"
    end_step FAILED "torch_peers.py failed; see peers.log"
  fi
fi

# bench_run NAME STEM ARGS...: one kc-bench run, logged to OUT/bench/STEM.log.
bench_run() {
  local name="$1" stem="$2" log rc counts note path
  shift 2
  log="$out/bench/$stem.log"
  begin_step "kc-bench $stem" "$name"
  "$bench" "$@" "${bench_extra[@]}" --benchmark_out="$out/bench/$stem.json" \
    --benchmark_out_format=json > "$log" 2>&1
  rc=$?
  # The closing table of the run, then the files it wrote (copied to OUT/tables/).
  sed -n '/^kernel  /,$p' "$log" | grep -v "^wrote "
  while read -r _ path; do
    echo "wrote $path"
    [ "$(dirname "$path")" = "$out/tables" ] || cp "$path" "$out/tables/"
  done < <(grep "^wrote " "$log")
  # Rows of that table: kernel, problem (e.g. "4096x4096x4096 bf16 alpha=1.5"), status (padded by
  # two or more spaces), then numbers or the reason.
  counts="$(sed -n '/^kernel  /,$p' "$log" \
    | grep -oE '  +(ok|FAILED|refused|harness error|skipped)(  |$)' \
    | awk '{ sub(/^ +/, ""); sub(/ +$/, ""); n[$0]++ }
           END { printf "%d ok, %d FAILED, %d harness errors, %d skipped, %d refused",
                 n["ok"], n["FAILED"], n["harness error"], n["skipped"], n["refused"] }')"
  case "$rc" in
    0) end_step ok "$counts" ;;
    2) end_step FAILED "kc-bench sees no GPU; see bench/$stem.log" ;;
    *) note="$counts"
       grep -q "^kernel  " "$log" || note="no results: $(grep -m 1 "kc-bench: " "$log" || tail -n 1 "$log")"
       end_step FAILED "$note; see bench/$stem.log" ;;
  esac
}

if [ -z "${KC_SKIP_BENCH:-}" ]; then
  mkdir -p "$out/bench" "$out/tables"
  if [ -n "$filter" ]; then
    bench_run "--filter '$filter'" filtered --filter "$filter" "${peers_args[@]}" --allow-dirty --markdown "$out/tables"
  elif [ "$quick" = 1 ]; then
    bench_run "stage 1 rung 11 and stage 3 rung 09 at 4096^3" quick-gemm \
      --filter '^stage1/sgemm/11_|^stage3/hgemm/09_' --shapes 4096x4096x4096 --allow-dirty --markdown "$out/tables"
    bench_run "stage 2 RMSNorm, LayerNorm, softmax at 32768x4096 bf16" quick-stage2 \
      --filter '^stage2/(rmsnorm|layernorm|softmax)/' --shapes 32768x4096 --dtype bf16 "${peers_args[@]}" \
      --allow-dirty --markdown "$out/tables"
  else
    for stage in stage1 stage2 stage3 stage4; do
      if [ "$("$bench" --list --filter "^$stage/" 2>/dev/null | wc -l)" -le 1 ]; then
        echo; echo "=== kc-bench: $stage has no registered kernels yet; nothing to run"
        continue
      fi
      stage_peers=()
      # Stages 2 and 3 have peers (the norms; attention and decode attention).
      { [ "$stage" = stage2 ] || [ "$stage" = stage3 ]; } && stage_peers=("${peers_args[@]}")
      bench_run "every $stage kernel on its documented shapes" "$stage" --filter "^$stage/" "${stage_peers[@]}" --markdown
    done
  fi
else
  record_step "kc-bench" skipped 0 "KC_SKIP_BENCH is set"
fi

# --- sanitizers (--full) --------------------------------------------------------------------------
# Each (tool, stage) run is its own step. A run fails for one of four reasons, told apart:
# a sanitizer finding (ERROR SUMMARY / RACECHECK SUMMARY with errors), a correctness failure seen
# while running under the tool (GoogleTest's [  FAILED  ] lines: the kernel is wrong, the tool
# found nothing), a time-out, or an exit with neither (a crash; the log says more).
# sanitizer_verdict TOOL LOG RC prints "ok|<the tool's summary>" or "FAILED|<why>".
sanitizer_verdict() {
  local tool="$1" log="$2" rc="$3" summary errors failed started finished verdict=()
  # The tool's own lines: "========= ERROR SUMMARY: N errors" (memcheck) and
  # "========= RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)" (racecheck).
  summary="$(grep -E "^========= (ERROR|RACECHECK) SUMMARY" "$log" | sed 's/^========= //' | paste -sd ';' -)"
  errors="$(sed -n -e 's/^========= ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' \
                   -e 's/^========= RACECHECK SUMMARY: .*(\([0-9][0-9]*\) error.*/\1/p' "$log" \
            | awk '{ s += $1 } END { print s + 0 }')"
  # GoogleTest's lines: a test that ran and got a wrong answer, which is not a sanitizer finding.
  failed="$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$log")"
  started="$(grep -c '^\[ RUN      \]' "$log")"
  finished="$(grep -cE '^\[ (      OK | FAILED  | SKIPPED )\] .*\([0-9]+ ms\)$' "$log")"
  if [ "$errors" -gt 0 ]; then verdict+=("sanitizer finding: $summary"); fi
  if [ "$failed" -gt 0 ]; then
    verdict+=("tests failed: $failed, a correctness check failing while under $tool (not a sanitizer finding)")
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict+=("timed out after ${KC_SANITIZER_TIMEOUT:-600} s, not a finding: lower KC_SANITIZER_MAX_WORK")
  elif [ "${#verdict[@]}" -eq 0 ] && [ "$rc" -ne 0 ]; then
    if [ "$started" -gt "$finished" ]; then
      verdict+=("exited with status $rc inside a test, without a finding or a failed check: a crash?")
    else
      verdict+=("exited with status $rc without a finding or a failed check")
    fi
  fi
  if [ "${#verdict[@]}" -eq 0 ] && [ -z "$summary" ]; then
    verdict+=("no sanitizer summary in the log: did $tool run?")
  fi
  if [ "${#verdict[@]}" -eq 0 ]; then
    echo "ok|$summary"
  else
    echo "FAILED|$(printf '%s; ' "${verdict[@]}" | sed 's/; $//')"
  fi
}

if [ "$full" = 1 ]; then
  begin_step "sanitizers" "compute-sanitizer memcheck and racecheck, every stage, all runs in parallel"
  mkdir -p "$out/sanitizer"
  if ! command -v compute-sanitizer > /dev/null 2>&1; then
    echo "compute-sanitizer is not on PATH (it ships with the CUDA toolkit: /usr/local/cuda/bin)"
    end_step FAILED "compute-sanitizer not found"
  else
    runs=()
    pids=()
    for tool in memcheck racecheck; do
      default_work=1048576
      for exe in "$build"/tests/kc_conformance_stage*; do
        [ -x "$exe" ] || continue
        # A stage with no kernels yet (grep -c reads everything: see the peers step on grep -q).
        [ "$("$exe" --gtest_list_tests 2>/dev/null | grep -c "^  ")" -gt 0 ] || continue
        stage="${exe##*_}"
        # Each (tool, stage) runs as KC_SANITIZER_SHARDS GoogleTest shards in parallel: racecheck
        # over stage 2 as one process did not finish in 110 s on an H200; in 8 shards it did.
        shards="${KC_SANITIZER_SHARDS:-4}"
        for (( shard = 0; shard < shards; shard++ )); do
          log="$out/sanitizer/$tool-$stage-shard$shard.log"
          (
            started=$SECONDS
            GTEST_TOTAL_SHARDS="$shards" GTEST_SHARD_INDEX="$shard" \
            KC_CONFORMANCE_SEEDS="${KC_SANITIZER_SEEDS:-1}" \
            KC_CONFORMANCE_MAX_WORK="${KC_SANITIZER_MAX_WORK:-$default_work}" \
              timeout -k 30 "${KC_SANITIZER_TIMEOUT:-600}" \
              compute-sanitizer --tool "$tool" --error-exitcode 3 "$exe" > "$log" 2>&1 &
            echo "$!" > "$log.pid"  # what stop_sanitizers ends on Ctrl-C
            wait "$!"
            echo "$? $(( SECONDS - started ))" > "$log.status"
          ) &
          pids+=("$!")
          runs+=("$tool $stage-shard$shard/$shards $log")
        done
        echo "started: $tool over $(basename "$exe") in $shards shards (KC_CONFORMANCE_SEEDS=${KC_SANITIZER_SEEDS:-1}," \
          "KC_CONFORMANCE_MAX_WORK=${KC_SANITIZER_MAX_WORK:-$default_work})"
      done
    done
    for pid in "${pids[@]}"; do wait "$pid"; done  # (a bare `wait` would also wait for the log's tee)
    end_step ok "${#runs[@]} runs finished; their results follow"
    for run in "${runs[@]}"; do
      read -r tool stage log <<< "$run"
      read -r rc secs < "$log.status" 2>/dev/null || { rc=1; secs=0; }
      echo
      echo "=== $tool $stage ($log)"
      python3 "$root/scripts/test_summary.py" gtest "$log" 2>/dev/null
      grep -m 5 -E "^========= (Invalid|Error|Race|Program hit|Malloc|Leaked|Barrier)" "$log"
      result="$(sanitizer_verdict "$tool" "$log" "$rc")"
      record_step "$tool $stage" "${result%%|*}" "$secs" "${result#*|}"
    done
  fi
fi

finish
