// kc/engine/gguf_blocks.hpp — the engine's kernels for GGUF blocks on the GPU: random blocks for
// benchmarks of a published shape in a quantized format, and their dequantization to bf16 (the
// bf16 copy the engine keeps beside the blocks: RunnerOptions::native_quantized).
//
// Types: q4_0, q4_1 and q8_0, laid out as ggml stores them (kc/engine/dequantize.hpp, whose CPU
// dequantization is the reference of dequantize_gguf_blocks: the same float arithmetic, then
// bf16 rounded to nearest even). Both run at load time, never inside a step. Each entry checks
// its arguments (kc::Error before any launch) and launches asynchronously on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kc/engine/ggml_types.hpp"

namespace kc::engine {

// `count` random blocks of `type` into `blocks` (count x the type's block bytes), a pure function
// of (seed, block index): d log-uniform in [2^-10, 2^-4] (a positive normal half), for q4_1 m of
// either sign with its magnitude log-uniform in [2^-10, 2^-2], the quants uniform over their range
// — the distribution of stage 3's gemv_gguf op (src/gemv_gguf_op.cpp).
void draw_gguf_blocks(GgmlType type, std::uint8_t* blocks, std::size_t count, std::uint64_t seed,
                      cudaStream_t stream);

// out[32 b + i] = weight i of block b, rounded to bf16, for `count` blocks of `type`.
void dequantize_gguf_blocks(GgmlType type, const std::uint8_t* blocks, std::size_t count, __nv_bfloat16* out,
                            cudaStream_t stream);

}  // namespace kc::engine
