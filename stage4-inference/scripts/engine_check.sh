#!/usr/bin/env bash
# The engine on a GPU machine, in one go: its GPU tests, the comparison with transformers, the
# real model through kc-generate, kc-bench on the engine's own kernels (table stage4-kernels),
# and kc-engine-bench with transformers as the peer.
#
#   stage4-inference/scripts/engine_check.sh OUT [BUILD]     (BUILD: default build/gpu-check)
#
# Needs a build with the GPU code (scripts/gpu-check.sh makes build/gpu-check), PyTorch and
# transformers; the GGUF comparison also needs the gguf and accelerate packages and
# KC_SMOLLM2_GGUF naming SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch_smollm2.sh). What runs and
# its exit status go to OUT/engine-check.log; the reference, the tables and every program's
# output to OUT/. KC_ENGINE_BENCH_ARGS replaces kc-engine-bench's model list
# (default: --synthetic smollm2-135m,llama-3.2-1b,llama-3.1-8b).
set -uo pipefail
out="${1:?usage: engine_check.sh OUT [BUILD]}"
build="${2:-build/gpu-check}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
log="$out/engine-check.log"
gguf="${KC_SMOLLM2_GGUF:-}"
step() {  # step NAME COMMAND...: runs it, output to OUT/NAME.txt, status to the log
  local name="$1"; shift
  local start=$SECONDS
  "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  printf '%-14s rc=%d  %4d s  %s\n' "$name" "$rc" $((SECONDS - start)) "$*" | tee -a "$log"
  return $rc
}
export KC_REQUIRE_GPU=1
step gpu-tests "$build/stage4-inference/tests/kc_stage4_gpu_tests" --gtest_filter='ModelRunner*:GpuSampler*'
step kernels "$build/bench/kc-bench" --filter '^stage4/' --markdown "$out/tables"
cases=gqa1_untied,gqa4_tied,gqa8_llama3
gguf_args=()
if [ -n "$gguf" ]; then cases="$cases,smollm2_gguf"; gguf_args=(--gguf "$gguf"); fi
step hf-reference python3 "$root/stage4-inference/scripts/hf_reference.py" --out "$out/hf-reference" \
  --device cuda --cases "$cases" "${gguf_args[@]}"
step hf-check python3 "$root/stage4-inference/scripts/check_hf_reference.py" "$out/hf-reference"
step parity env KC_HF_REFERENCE="$out/hf-reference" KC_REQUIRE_HF_REFERENCE=1 \
  "$build/stage4-inference/tests/kc_stage4_gpu_tests" --gtest_filter='HfParity*'
if [ -n "$gguf" ]; then
  for graphs in "" --cuda-graphs; do
    step "generate${graphs:+-graphs}" "$build/stage4-inference/kc-generate" --model "$gguf" --chat \
      --prompt "What is the capital of France?" --max-tokens 64 --verbose $graphs
  done
fi
read -r -a bench_models <<< "${KC_ENGINE_BENCH_ARGS:---synthetic smollm2-135m,llama-3.2-1b,llama-3.1-8b}"
step hf-peers python3 "$root/bench/peers/hf_engine_peers.py" "${bench_models[@]}" --out "$out/hf-peers.json"
step engine-bench "$build/stage4-inference/kc-engine-bench" "${bench_models[@]}" --peers "$out/hf-peers.json" \
  --markdown "$out/tables"
echo "engine_check: done; $log" | tee -a "$log"
