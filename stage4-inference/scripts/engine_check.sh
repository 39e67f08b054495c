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
# (default: --synthetic smollm2-135m,llama-3.2-1b,llama-3.1-8b). KC_HF_REFERENCE_DIR puts the
# transformers reference elsewhere (default OUT/hf-reference; it holds the random-weight
# checkpoints, hundreds of MB, so keep it out of OUT when OUT must travel). KC_SERVE_LOAD=1 also
# runs kc-serve's load test (scripts/serve_load_test.py) on the 1B shape with 64 clients, on
# SmolLM2 (with KC_SMOLLM2_GGUF) with 256 clients, disconnects and a burst of 300 past a queue of
# 32, and on
# the 1B shape with a 400-block KV cache (preemption), each 40 s; summaries to OUT/serve/.
# KC_LLAMA_BENCH naming a llama-bench binary (bench/peers/build_llama_cpp.sh) adds llama.cpp on the
# SmolLM2 file as a second peer, and kc-engine-bench then also runs that file (--model);
# KC_LLAMA_PEER_JSON instead names llama_cpp_peer.py's output from an earlier run (its date is in
# it and in the table). KC_ENGINE_BENCH_OPTIONS adds options for kc-engine-bench alone (e.g.
# "--fuse-kernels both"); KC_SKIP_GPU_TESTS=1 skips the ModelRunner/GpuSampler tests (run by ctest
# already); KC_SERVE_DURATION sets each load test's seconds (default 40). KC_SERVE_SWEEP=1 runs
# kc-serve's load sweep (1, 4, 16, 64 and 256 clients over 4 client processes, KC_SWEEP_DURATION
# seconds each, default 20) on the 1B shape and, with KC_SMOLLM2_GGUF, the SmolLM2 file, to
# OUT/serve/sweep-*.json (plot: stage4-inference/tools/plot_serve.py). KC_HF_COMPILED=1 adds
# transformers with a static cache and torch.compile (hf_engine_peers.py --mode compiled) as a
# further peer of kc-engine-bench (it compiles a decode step per batch size: minutes).
# KC_ENGINE_TRACE=1 also records the batch-1 decode step of each synthetic shape at 128 keys with
# kc-trace (bench/trace/, docs/methodology.md "Timelines") and writes the per-kernel summaries to
# OUT/trace/<shape>.txt (the gzipped CSVs beside them).
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
if [ "${KC_SKIP_GPU_TESTS:-0}" != 1 ]; then
  step gpu-tests "$build/stage4-inference/tests/kc_stage4_gpu_tests" --gtest_filter='ModelRunner*:GpuSampler*'
fi
step kernels "$build/bench/kc-bench" --filter '^stage4/' --markdown "$out/tables"
cases=gqa1_untied,gqa4_tied,gqa8_llama3
gguf_args=()
if [ -n "$gguf" ]; then cases="$cases,smollm2_gguf"; gguf_args=(--gguf "$gguf"); fi
reference="${KC_HF_REFERENCE_DIR:-$out/hf-reference}"
step hf-reference python3 "$root/stage4-inference/scripts/hf_reference.py" --out "$reference" \
  --device cuda --cases "$cases" "${gguf_args[@]}"
step hf-check python3 "$root/stage4-inference/scripts/check_hf_reference.py" "$reference"
step parity env KC_HF_REFERENCE="$reference" KC_REQUIRE_HF_REFERENCE=1 \
  "$build/stage4-inference/tests/kc_stage4_gpu_tests" --gtest_filter='HfParity*'
if [ -n "$gguf" ]; then
  for eager in "" --no-cuda-graphs; do
    step "generate${eager:+-eager}" "$build/stage4-inference/kc-generate" --model "$gguf" --chat \
      --prompt "What is the capital of France?" --max-tokens 64 --verbose $eager
  done
fi
read -r -a bench_models <<< "${KC_ENGINE_BENCH_ARGS:---synthetic smollm2-135m,llama-3.2-1b,llama-3.1-8b}"
step hf-peers python3 "$root/bench/peers/hf_engine_peers.py" "${bench_models[@]}" --out "$out/hf-peers.json"
peers="$out/hf-peers.json"
if [ "${KC_HF_COMPILED:-0}" = 1 ]; then
  step hf-compiled python3 "$root/bench/peers/hf_engine_peers.py" "${bench_models[@]}" --mode compiled \
    --out "$out/hf-compiled.json" && peers="$peers,$out/hf-compiled.json"
fi
if [ -n "${KC_LLAMA_BENCH:-}" ] && [ -n "$gguf" ]; then
  step llama-peer python3 "$root/bench/peers/llama_cpp_peer.py" --llama-bench "$KC_LLAMA_BENCH" --gguf "$gguf" \
    --out "$out/llama-peer.json" && peers="$peers,$out/llama-peer.json"
  bench_models+=(--model "$gguf")
elif [ -n "${KC_LLAMA_PEER_JSON:-}" ] && [ -n "$gguf" ]; then
  peers="$peers,$KC_LLAMA_PEER_JSON"
  bench_models+=(--model "$gguf")
fi
read -r -a bench_options <<< "${KC_ENGINE_BENCH_OPTIONS:-}"
step engine-bench "$build/stage4-inference/kc-engine-bench" "${bench_models[@]}" "${bench_options[@]}" \
  --peers "$peers" --markdown "$out/tables"
if [ "${KC_ENGINE_TRACE:-0}" = 1 ]; then
  mkdir -p "$out/trace"
  tracer="$(cd "$build" && pwd)/bench/libkc_trace.so"  # the driver loads it by this path
  for shape in smollm2-135m llama-3.2-1b llama-3.1-8b; do
    step "trace-$shape" env KC_TRACE_OUT="$out/trace/$shape.csv" CUDA_INJECTION64_PATH="$tracer" \
      "$build/stage4-inference/kc-engine-bench" --synthetic "$shape" --contexts 128 --decode-tokens 256 \
      --prefill 512 --concurrency 1 --cuda-graphs on
    python3 "$root/scripts/trace_summary.py" "$out/trace/$shape.csv" --by-name > "$out/trace/$shape.txt" 2>&1
    python3 "$root/scripts/trace_summary.py" "$out/trace/$shape.csv" >> "$out/trace/$shape.txt" 2>&1
    gzip -f "$out/trace/$shape.csv"
  done
fi
if [ "${KC_SERVE_LOAD:-0}" = 1 ]; then
  mkdir -p "$out/serve"
  duration="${KC_SERVE_DURATION:-40}"
  load="$root/stage4-inference/scripts/serve_load_test.py"
  serve="$build/stage4-inference/server/kc-serve"
  tokenizer="$root/stage4-inference/tests/data/tokenizer/smollm2.tokenizer.json"
  step serve-1b-64 python3 "$load" --spawn "$serve" --synthetic llama-3.2-1b --tokenizer "$tokenizer" -- \
    --clients 64 --duration "$duration" --max-tokens 128 --out "$out/serve/1b-64.json"
  if [ -n "$gguf" ]; then
    step serve-smollm2 python3 "$load" --spawn "$serve" --model "$gguf" --max-queue 32 -- --clients 256 \
      --duration "$duration" --max-tokens 128 --disconnect-fraction 0.1 --burst 300 \
      --expect-rejections --out "$out/serve/smollm2-256.json"
  fi
  step serve-small-kv python3 "$load" --spawn "$serve" --synthetic llama-3.2-1b --tokenizer "$tokenizer" \
    --num-blocks 400 -- --clients 64 --duration "$duration" --max-tokens 128 --expect-preemptions --out "$out/serve/1b-small-kv.json"
fi
if [ "${KC_SERVE_SWEEP:-0}" = 1 ]; then
  mkdir -p "$out/serve"
  load="$root/stage4-inference/scripts/serve_load_test.py"
  serve="$build/stage4-inference/server/kc-serve"
  tokenizer="$root/stage4-inference/tests/data/tokenizer/smollm2.tokenizer.json"
  sweep=(--clients 1,4,16,64,256 --duration "${KC_SWEEP_DURATION:-20}" --max-tokens 128 --processes 4)
  step sweep-1b python3 "$load" --spawn "$serve" --synthetic llama-3.2-1b --tokenizer "$tokenizer" -- \
    "${sweep[@]}" --out "$out/serve/sweep-1b.json"
  if [ -n "$gguf" ]; then
    step sweep-smollm2 python3 "$load" --spawn "$serve" --model "$gguf" -- "${sweep[@]}" \
      --out "$out/serve/sweep-smollm2.json"
  fi
fi
echo "engine_check: done; $log" | tee -a "$log"
