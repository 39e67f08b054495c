// kc/stage3/quantized_gemv.hpp — the public entry of stage 3's weight-only quantized GEMV:
// y = x . w^T for the few rows of a decode step, w in llama.cpp's GGUF blocks as a file stores them.
//
// Stage 4 calls it through this header, never through a rung. What it computes and the block
// layouts (q4_0, q4_1, q8_0; 32 weights a block along K) are those of the gemv_gguf op
// (kc/stage3/gemv_gguf_args.hpp): x [M, K] and y [M, N] bf16, dense and row-major; w [N, K] as N
// rows of K / 32 consecutive blocks, packed, no padding; FP32 accumulation, y rounded to bf16 (not
// added to: a caller that needs y += x . w^T adds it itself).
//
// An entry, on every call:
//   1. checks the arguments (check_quantized_gemv_args) and throws kc::Error naming the argument
//      and the rule before any CUDA call: on bad input nothing runs and nothing is written;
//   2. runs the rung for the shape and returns which one ran (QuantizedGemvKernel), so the engine
//      can name it. One rung exists today, stage3/gemv_gguf/01_warp_per_column (a warp per output
//      column, the blocks decoded where they are read), for every type and every M in 1..16.
// The launch is asynchronous on `stream`, allocates nothing and never synchronizes: it can be
// captured in a CUDA graph. The build holds code for sm_80 and sm_90a; an older GPU gets the
// runtime's kc::CudaError at the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>

#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {

// What ran.
enum class QuantizedGemvKernel {
  gemv_gguf_01_warp_per_column,  // stage3/gemv_gguf/01_warp_per_column (every type, M <= 16)
};

// "stage3/gemv_gguf/01_warp_per_column": the kc-bench id of the rung.
std::string_view quantized_gemv_kernel_name(QuantizedGemvKernel kernel);
// "q4_0", "q4_1", "q8_0" ("unknown" for any other value).
std::string_view gguf_block_type_name(GgufBlockType type);

// The arguments are the rungs' (kc/stage3/gemv_gguf_args.hpp): m, n, k; type; x [M, K] bf16,
// 4-byte aligned (the rung reads bf16 pairs); w, N rows of K / 32 blocks of `type`, 4-byte aligned;
// y [M, N] bf16, 2-byte aligned.
using QuantizedGemvArgs = GgufGemvArgs;

// Throws kc::Error unless `args` describe a call the rung can run: type q4_0, q4_1 or q8_0; M in
// [1, kGgufGemvMaxRows] (16: a decode step; more rows are a GEMM's work); N >= 1; K a positive
// multiple of 32 (whole blocks); w, x and y non-null and aligned as above. No CUDA call.
void check_quantized_gemv_args(const QuantizedGemvArgs& args);

// y = x . w^T on `stream`, after check_quantized_gemv_args; returns the rung that ran.
QuantizedGemvKernel quantized_gemv(const QuantizedGemvArgs& args, cudaStream_t stream);

}  // namespace kc::stage3
