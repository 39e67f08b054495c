// kc/stage3/gemv_gguf_args.hpp — the arguments of the weight-only quantized GEMV that reads
// llama.cpp's GGUF block formats as they are stored, and one launch per rung. An argument header:
// the rung files include it and nothing of the harness (kc/stage3/gemv_gguf.hpp defines the op).
//
// y[m][n] = sum_k x[m][k] * w[n][k], for the M <= 16 rows of a decode step: x [M, K] and y [M, N]
// bf16, FP32 accumulation; w [N, K] stored as ggml blocks of 32 weights along K, row after row
// (N rows of K / 32 blocks, as a GGUF file holds a [K, N] weight — ggml lists the inner
// dimension first), packed with no padding, little-endian, d and m IEEE half:
//
//   type   ggml id  bytes  layout                        weight i (0..31) of the block
//   q4_0   2        18     f16 d, uint8 qs[16]           d * (nibble(i) - 8)
//   q4_1   3        20     f16 d, f16 m, uint8 qs[16]    d * nibble(i) + m
//   q8_0   8        34     f16 d, int8 q[32]             d * q[i]
//
// nibble(i): the LOW nibble of qs[i] for i < 16, the HIGH nibble of qs[i - 16] for i >= 16 (the
// two halves of the block share bytes; neighbours do not).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kc::stage3 {

enum class GgufBlockType : int { q4_0 = 2, q4_1 = 3, q8_0 = 8 };

inline constexpr int kGgufBlockWeights = 32;
// The most rows of x one launch takes (a decode step; larger M is a GEMM's work).
inline constexpr int kGgufGemvMaxRows = 16;

constexpr int gguf_block_bytes(GgufBlockType type) {
  return type == GgufBlockType::q4_0 ? 18 : type == GgufBlockType::q4_1 ? 20 : 34;
}

struct GgufGemvArgs {
  int m = 0, n = 0, k = 0;  // k a multiple of 32
  GgufBlockType type = GgufBlockType::q4_0;
  const __nv_bfloat16* x = nullptr;  // [m, k]
  const std::uint8_t* w = nullptr;   // [n, k / 32] blocks of `type`
  __nv_bfloat16* y = nullptr;        // [m, n]
};

// Rung 01: a warp per output column; its lanes take the column's blocks in turn, decode each into
// 32 FP32 weights and multiply them with the M rows of x; a warp reduction per row.
void gemv_gguf_01_warp_per_column(const GgufGemvArgs& args, cudaStream_t stream);

// For the negative control only: rung 01 decoding each byte's nibbles in the wrong order
// (weight i in the high nibble). The check must fail it.
void gemv_gguf_01_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

}  // namespace kc::stage3
