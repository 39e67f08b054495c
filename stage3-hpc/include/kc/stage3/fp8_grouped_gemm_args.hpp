// kc/stage3/fp8_grouped_gemm_args.hpp — the arguments of the FP8 grouped GEMM of a mixture-of-experts
// layer (block scales), and one launch per rung. An argument header: the rung files include it and
// nothing of the harness (kc/stage3/fp8_grouped_gemm.hpp defines the op).
//
// The grouped GEMM's layout (kc/stage3/grouped_gemm_args.hpp: tokens sorted by expert, expert g's
// rows row_starts[g] .. row_starts[g + 1] - 1 of A and C, an expert may have none) with the FP8
// GEMM's operands and block scales (kc/stage3/fp8_gemm_args.hpp, DeepSeek-V3's recipe):
//
//   A [tokens, K] e4m3        s_A [ceil(K / 128), scale_a_stride] f32: s_A[kb][t] scales the 128
//                             values of K block kb of token t's row; the stride is tokens rounded up
//                             to a multiple of 4, so that each K block's row of scales starts
//                             16-byte aligned (TMA brings a tile's 128 scales into shared memory);
//                             the padding columns are never read
//   B [G, N, K] e4m3          s_B [G, ceil(N / 128), ceil(K / 128)] f32: expert g's 128 x 128
//                             blocks, s_B[g][n / 128][kb]
//   C [tokens, N] bf16        C_g = (A_g . s_A)(B_g . s_B[g])^T, FP32 accumulation promoted every
//                             128-deep K step, alpha = 1, beta = 0 (C is written, never read)
//
// The s_A layout is the one a token-sorted MoE layer's quantize produces for all its tokens at once
// (fp8_quantize's [ceil(K/128), M] with M padded to a multiple of 4): no per-expert copies.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kc/stage3/fp8_gemm_args.hpp"

namespace kc::stage3 {

// The output tiles of the FP8 grouped rungs: 128 rows, and 128 columns (rung 01: the FP8 GEMM's
// rung 09 tile, one block of B's scales wide) or 192 (rung 02: rung 10's; rung 03 runs either).
// The host builds a tile table (group_tile_starts) for each width.
inline constexpr int kFp8GroupedTileRows = 128;
inline constexpr int kFp8GroupedTileCols = 128;
inline constexpr int kFp8GroupedWideTileCols = 192;

// s_A's row stride for `tokens` rows of A: tokens rounded up to a multiple of 4 (16 bytes of floats);
// 64-bit, so that the op's and the launch's checks can ask it of any count without overflow.
__host__ __device__ constexpr std::int64_t fp8_grouped_scale_a_stride(std::int64_t tokens) {
  return (tokens + 3) / 4 * 4;
}

struct Fp8GroupedGemmArgs {
  int groups = 0;                  // G, the experts
  int n = 0, k = 0;                // every expert's weight is N x K
  const fp8e4m3* a = nullptr;      // [tokens, K]
  const fp8e4m3* b = nullptr;      // [G, N, K]
  bf16* c = nullptr;               // [tokens, N]
  const float* scale_a = nullptr;  // [ceil(K / 128), fp8_grouped_scale_a_stride(tokens)]
  const float* scale_b = nullptr;  // [G, ceil(N / 128), ceil(K / 128)]
  // Device arrays of G + 1 prefix sums: each expert's first row (row_starts[G] = tokens) and first
  // output tile in the launch's grid, of tiles kFp8GroupedTileRows x kFp8GroupedTileCols
  // (tile_starts, tile_starts[G] = tiles: rung 01's grid) and kFp8GroupedTileRows x
  // kFp8GroupedWideTileCols (wide_tile_starts, wide_tile_starts[G] = wide_tiles: rung 02's).
  // Every row_starts[g] must be a multiple of 4 (each expert's rows padded to 4, as a token-sorted
  // FP8 layer pads them: DeepGEMM pads to 128): TMA brings a tile's 128 scales of A in from its first
  // token's, and a TMA box must start 16-byte aligned in its row. The launch cannot read the device
  // arrays to check it; the op's rungs refuse such problems, and a launch with one stops the kernel
  // with an illegal-instruction error.
  const int* row_starts = nullptr;
  const int* tile_starts = nullptr;
  const int* wide_tile_starts = nullptr;
  int tiles = 0;       // tile_starts[G], also on the host
  int wide_tiles = 0;  // wide_tile_starts[G], also on the host
  int tokens = 0;      // row_starts[G], also on the host
};

// What every rung's launch checks before any CUDA call (src/fp8_grouped_gemm_op.cpp): G >= 1,
// N >= 1, K >= 1 with K % 16 == 0, tokens >= 0 (0: nothing to do), tiles and wide_tiles >= 0, A, B,
// C, both scales and the three prefix sums present, A, B, C and s_A 16-byte aligned, every matrix within
// 2^31 - 1 elements. Throws kc::Error naming the rule.
void check_fp8_grouped_gemm_args(const Fp8GroupedGemmArgs& args);

class HopperLaunchCache;  // the tensor maps and launch facts of the Hopper kernels (arch/sm90)

// Rung 01: the FP8 GEMM's rung 09 kernel (128 x 128 tiles, each K step's block scales brought into
// the stage, two partial sets promoted behind) walking every expert's tiles from the grouped GEMM's
// tile table; the epilogue keeps each expert's rows (TMA stores where a 64-row half lies inside its
// expert, guarded direct stores where not). sm_90a (compute capability 9.0).
void fp8_grouped_gemm_01_scales_in_stage(const Fp8GroupedGemmArgs& args, cudaStream_t stream,
                                         HopperLaunchCache& cache);
// Rung 02: the FP8 GEMM's rung 10 kernel (128 x 192 tiles, each K step's block scales in the stage,
// one partial set, each step waited for and promoted) walking a tile table of 128 x 192 tiles; the
// epilogue as rung 01's. sm_90a (compute capability 9.0).
void fp8_grouped_gemm_02_wide_tiles(const Fp8GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 03: rung 01's kernel or rung 02's, whichever the estimate says fills its persistent waves
// in less time (fp8_grouped_narrow_tiles_win). sm_90a (compute capability 9.0).
void fp8_grouped_gemm_03_width_per_layer(const Fp8GroupedGemmArgs& args, cudaStream_t stream,
                                         HopperLaunchCache& cache);

// Rung 03's choice: whether `tiles` narrow tiles (128 x 128) on `resident_narrow` persistent CTAs
// take less estimated time than `wide_tiles` wide ones (128 x 192) on `resident_wide`: the waves
// each takes, a narrow tile's time counted as kFp8GroupedNarrowTileTime of a wide one's (FP8 rung
// 11's figure for rungs 09 and 10; the stage-3 README's FP8 grouped rung 03 checks it against the
// grouped rungs' own times).
inline constexpr double kFp8GroupedNarrowTileTime = 0.77;
bool fp8_grouped_narrow_tiles_win(int tiles, int wide_tiles, int resident_narrow, int resident_wide);

// Rung 01's kernel with Fp8Flaw::neighbours_weight_scales (fp8_gemm_args.hpp), for the negative control
// stage3/fp8_grouped_gemm/nc_neighbours_weight_scales.
void fp8_grouped_gemm_01_neighbours_weight_scales(const Fp8GroupedGemmArgs& args, cudaStream_t stream,
                                                  HopperLaunchCache& cache);

}  // namespace kc::stage3
