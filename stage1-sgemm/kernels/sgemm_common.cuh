// sgemm_common.cuh — what several SGEMM rungs share, introduced by the rung named at each piece.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/sgemm_tiling.hpp"

namespace kc::stage1 {

// Rung 01. C = alpha * acc + beta * C, with the BLAS rule that C is not read when beta == 0: C
// may then hold anything, NaN included, and must not leak into the result.
__device__ __forceinline__ void store_result(float* c, float acc, float alpha, float beta) {
  *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
}

// Rungs 02-08 use a one-dimensional grid of tiles_m * tiles_n blocks in row-major tile order:
// the order a 2D grid would give, without the 65535 limit of gridDim.y (M = 4 million and
// K = 1 is a legal problem).
inline dim3 tile_grid(const SgemmArgs& args, int tile_rows, int tile_cols) {
  return dim3(static_cast<unsigned>(ceil_div(args.m, tile_rows)) *
              static_cast<unsigned>(ceil_div(args.n, tile_cols)));
}

// Rung 06. Rows of a row-major matrix can be read and written as float4 when every row starts on
// a 16-byte boundary: the base pointer is 16-byte aligned and the leading dimension is a multiple
// of 4 floats.
inline bool rows_are_float4_aligned(const void* base, int leading_dimension) {
  return leading_dimension % 4 == 0 && reinterpret_cast<std::uintptr_t>(base) % 16 == 0;
}

// Rung 06. matrix[row][col .. col+3] of a rows x cols matrix, zero where it lies outside. One
// 16-byte load (LDG.E.128) when the rows are float4-aligned and all four are inside, else up to
// four scalar loads. `col` is a multiple of 4.
__device__ __forceinline__ float4 load_vec4_or_zero(const float* matrix, int ld, int rows, int cols,
                                                    int row, int col, bool rows_aligned) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (row >= rows || col >= cols) return v;
  const float* p = matrix + (row * ld + col);
  if (rows_aligned && col + 3 < cols) return *reinterpret_cast<const float4*>(p);
  v.x = p[0];
  if (col + 1 < cols) v.y = p[1];
  if (col + 2 < cols) v.z = p[2];
  if (col + 3 < cols) v.w = p[3];
  return v;
}

// Rung 06. Copies the bm x bk tile of A whose top-left element is A[row0][k0] into shared memory
// transposed, smem_a[k * kAStride + m]: in the multiply, the column of A a thread needs at one k
// is then contiguous and comes in with LDS.128. One float4 of a row per thread and slot, scattered
// into four rows of the transposed tile.
template <int kTileRows, int kTileK, int kThreads, int kAStride>
__device__ __forceinline__ void load_a_tile_transposed(const SgemmArgs& args, int row0, int k0,
                                                       float* smem_a, bool a_rows_aligned) {
  constexpr int kSlots = kTileRows * kTileK / 4;
  static_assert(kTileK % 4 == 0 && kSlots % kThreads == 0,
                "every thread must load the same number of float4 of the A tile");
#pragma unroll
  for (int i = 0; i < kSlots / kThreads; ++i) {
    const TileElement e = vec4_slot(static_cast<int>(threadIdx.x) + i * kThreads, kTileK);
    const float4 v =
        load_vec4_or_zero(args.a, args.lda, args.m, args.k, row0 + e.row, k0 + e.col, a_rows_aligned);
    smem_a[(e.col + 0) * kAStride + e.row] = v.x;
    smem_a[(e.col + 1) * kAStride + e.row] = v.y;
    smem_a[(e.col + 2) * kAStride + e.row] = v.z;
    smem_a[(e.col + 3) * kAStride + e.row] = v.w;
  }
}

// Rung 06. Copies the bk x bn tile of B whose top-left element is B[k0][col0] into shared memory
// as it is, smem_b[k * kTileCols + n], one float4 per thread and slot (LDG.E.128, then STS.128).
template <int kTileK, int kTileCols, int kThreads>
__device__ __forceinline__ void load_b_tile(const SgemmArgs& args, int k0, int col0, float* smem_b,
                                            bool b_rows_aligned) {
  constexpr int kSlots = kTileK * kTileCols / 4;
  static_assert(kTileCols % 4 == 0 && kSlots % kThreads == 0,
                "every thread must load the same number of float4 of the B tile");
#pragma unroll
  for (int i = 0; i < kSlots / kThreads; ++i) {
    const TileElement e = vec4_slot(static_cast<int>(threadIdx.x) + i * kThreads, kTileCols);
    *reinterpret_cast<float4*>(smem_b + e.row * kTileCols + e.col) =
        load_vec4_or_zero(args.b, args.ldb, args.k, args.n, k0 + e.row, col0 + e.col, b_rows_aligned);
  }
}

// Rung 06. A thread's N values of one row of a shared-memory tile, in N / 4 float4 (LDS.128):
// values first .. first + 3, first + step .. first + step + 3, and so on.
template <int N>
__device__ __forceinline__ void load_fragment(const float* row, int first, int step, float (&values)[N]) {
#pragma unroll
  for (int s = 0; s < N / 4; ++s) {
    const float4 v = *reinterpret_cast<const float4*>(row + first + s * step);
    values[4 * s + 0] = v.x;
    values[4 * s + 1] = v.y;
    values[4 * s + 2] = v.z;
    values[4 * s + 3] = v.w;
  }
}

// Rung 05's outer product, as rungs 06 and up write it: acc[i][j] += a[i] * b[j], TM * TN FMAs.
template <int TM, int TN>
__device__ __forceinline__ void accumulate_outer_product(const float (&a)[TM], const float (&b)[TN],
                                                         float (&acc)[TM][TN]) {
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

// Rung 06. One k tile of the register-tiled product: for each k, the thread's TM values of A and
// TN values of B come from shared memory as float4 (LDS.128), then TM * TN FMAs update its
// accumulators. Where the values sit is `place` (see FragmentPlacement); the layouts of the
// rungs differ only in it and in kAStride.
template <int kTileK, int TM, int TN, int kAStride, int kBStride>
__device__ __forceinline__ void multiply_tile(const float* smem_a, const float* smem_b,
                                              const FragmentPlacement& place, float (&acc)[TM][TN]) {
  static_assert(TM % 4 == 0 && TN % 4 == 0, "outputs come in 4 x 4 sub-tiles");
#pragma unroll
  for (int k = 0; k < kTileK; ++k) {
    float a[TM];
    float b[TN];
    load_fragment(smem_a + k * kAStride, place.row0, place.row_step, a);
    load_fragment(smem_b + k * kBStride, place.col0, place.col_step, b);
    accumulate_outer_product(a, b, acc);
  }
}

// Rung 06. C[row][col .. col+3] = alpha * acc + beta * C for the four outputs inside C, C unread
// when beta == 0. One 16-byte store when C's rows are float4-aligned and all four are inside.
__device__ __forceinline__ void store_vec4_result(const SgemmArgs& args, int row, int col, float4 acc,
                                                  bool c_rows_aligned) {
  if (row >= args.m || col >= args.n) return;
  float* p = args.c + (row * args.ldc + col);
  if (c_rows_aligned && col + 3 < args.n) {
    float4 out = make_float4(args.alpha * acc.x, args.alpha * acc.y, args.alpha * acc.z, args.alpha * acc.w);
    if (args.beta != 0.f) {
      const float4 old = *reinterpret_cast<const float4*>(p);
      out.x += args.beta * old.x;
      out.y += args.beta * old.y;
      out.z += args.beta * old.z;
      out.w += args.beta * old.w;
    }
    *reinterpret_cast<float4*>(p) = out;
    return;
  }
  const float values[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (col + j < args.n) store_result(p + j, values[j], args.alpha, args.beta);
}

// Rung 10 (split-K). C[row][col .. col+3] += alpha * acc, atomically: several blocks add their
// share of the K sum into the same outputs, after C was set to beta * C (see scale_c in rung 09).
// On sm_90 four aligned floats go as one vector reduction (red.global.add.v4.f32, SASS
// REDG.E.ADD.F32x4): a quarter of the L2 atomic operations of four scalar ones.
__device__ __forceinline__ void accumulate_vec4(const SgemmArgs& args, int row, int col, float4 acc,
                                                bool c_rows_aligned) {
  if (row >= args.m || col >= args.n) return;
  float* p = args.c + (row * args.ldc + col);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (c_rows_aligned && col + 3 < args.n) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(args.alpha * acc.x),
                 "f"(args.alpha * acc.y), "f"(args.alpha * acc.z), "f"(args.alpha * acc.w)
                 : "memory");
    return;
  }
#else
  (void)c_rows_aligned;
#endif
  const float values[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (col + j < args.n) atomicAdd(p + j, args.alpha * values[j]);
}

// Rung 06. Writes a thread's TM x TN accumulators to the C tile at (tile_row0, tile_col0), four
// columns at a time; `accumulate` adds them atomically instead (split-K).
template <int TM, int TN>
__device__ __forceinline__ void store_register_tile(const SgemmArgs& args, int tile_row0, int tile_col0,
                                                    const FragmentPlacement& place,
                                                    const float (&acc)[TM][TN], bool c_rows_aligned,
                                                    bool accumulate) {
#pragma unroll
  for (int sm = 0; sm < TM / 4; ++sm)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = tile_row0 + place.row0 + sm * place.row_step + i;
#pragma unroll
      for (int sn = 0; sn < TN / 4; ++sn) {
        const int col = tile_col0 + place.col0 + sn * place.col_step;
        const float* a = acc[4 * sm + i] + 4 * sn;
        const float4 v = make_float4(a[0], a[1], a[2], a[3]);
        if (accumulate)
          accumulate_vec4(args, row, col, v, c_rows_aligned);
        else
          store_vec4_result(args, row, col, v, c_rows_aligned);
      }
    }
}

}  // namespace kc::stage1
