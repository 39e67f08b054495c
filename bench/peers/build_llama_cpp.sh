#!/usr/bin/env bash
# Builds llama-bench from the archive of bench/peers/fetch_llama_cpp.sh.
#
#   bench/peers/build_llama_cpp.sh SRC.tar.gz BUILD_DIR [cuda|cpu]     (default: cuda, for sm_90)
#
# Prints the path of the llama-bench binary last. CUDA builds take several minutes on 16 cores
# (every ggml CUDA kernel instance is compiled); KC_LLAMA_CUDA_ARCH overrides the architecture (90).
set -euo pipefail
archive="${1:?usage: build_llama_cpp.sh SRC.tar.gz BUILD_DIR [cuda|cpu]}"
build="${2:?usage: build_llama_cpp.sh SRC.tar.gz BUILD_DIR [cuda|cpu]}"
backend="${3:-cuda}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"
tar xzf "$archive" -C "$build"
cuda=OFF
[ "$backend" = cuda ] && cuda=ON
cmake -S "$build/llama.cpp" -B "$build/out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA="$cuda" \
  -DCMAKE_CUDA_ARCHITECTURES="${KC_LLAMA_CUDA_ARCH:-90}" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DGGML_NATIVE=OFF >&2
cmake --build "$build/out" --target llama-bench -j "$(nproc)" >&2
ls "$build/out/bin/llama-bench"
