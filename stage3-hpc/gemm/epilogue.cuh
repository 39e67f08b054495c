// epilogue.cuh — turning FP32 accumulators into BF16 results in C, shared by every rung.
//
// An epilogue computes activation(alpha.acc + beta.C) and moves the result to memory. The linear
// combination is BLAS's; the activation is the identity for the plain GEMM (rungs 01-09) and
// + bias[col] followed by GELU for rung 10. Keeping the two apart lets an epilogue apply the
// linear combination to a whole tile under one test of beta, and then run the activation as
// straight-line code (epilogues that branch per element cannot overlap one element's latency with
// another's work). Stores here are the direct kind: each thread writes the elements its
// tensor-core fragment holds, guarded against the edges of C.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "hgemm.hpp"
#include "kc/core/gelu.hpp"

namespace kc::stage3 {

// alpha.acc + beta.C[row][col]. BLAS semantics: with beta == 0, C is never read (it may be NaN).
struct LinearCombination {
  float alpha = 1.f;
  float beta = 0.f;
  const bf16* c = nullptr;  // C before the kernel; read only when beta != 0
  int ldc = 0;              // = N

  // The values at (row, col) and (row, col + 1), col even; (row, col) must lie inside C, and
  // col + 1 may be N (that value is then never stored, and C is not read there).
  __device__ float2 operator()(float2 acc, int row, int col) const {
    float2 value = make_float2(alpha * acc.x, alpha * acc.y);
    if (beta != 0.f) {
      const bf16* c_row = c + static_cast<std::size_t>(row) * ldc;
      value.x += beta * __bfloat162float(c_row[col]);
      if (col + 1 < ldc) value.y += beta * __bfloat162float(c_row[col + 1]);
    }
    return value;
  }
};

__host__ __device__ inline LinearCombination linear_combination(const HgemmArgs& args) {
  return {args.alpha, args.beta, args.c, args.ldc};
}

// An activation maps the linear combination of two neighbouring outputs, (row, col) and
// (row, col + 1) with col even, to their results, reading no memory. Whatever it needs per output
// column (the bias of rung 10) it fetches beforehand in column_pair(col, n), once for the two
// columns a thread holds in a fragment, and gets back for every row it holds there: one load
// per column, not per element.

// The plain GEMM: results are the linear combination.
struct Identity {
  struct ColumnPair {};  // nothing per column
  __device__ ColumnPair column_pair(int /*col*/, int /*n*/) const { return {}; }
  __device__ float2 operator()(float2 value, ColumnPair /*columns*/) const { return value; }
};

// GELU, tanh form (the one GPT-2 and many LLM MLPs use), in float on the device: the formula
// x / (1 + exp(-2u)) of kc/core/gelu.hpp with its kernel arithmetic (ex2.approx and an approximate
// division: six FMA-pipe instructions and two MUFU ops per element). Stage 2's activation kernels
// call the same formula, its references evaluate it in double, and gelu_tanh_reference
// (src/gemm_ops.cpp) writes out the same x / (1 + exp(-2u)). The separate bias+GELU kernel of
// the unfused baseline calls this same function.
__device__ __forceinline__ float gelu_tanh(float x) { return core::gelu_tanh<core::KernelMath>(x); }

// gelu(value + bias[col]): the activation of rung 10.
struct BiasGelu {
  const bf16* bias = nullptr;  // N elements, 4-byte aligned (checked at launch)

  // The bits of bias[col] (low half) and bias[col + 1] (high half), zero past N: one 32-bit
  // register per pair (an epilogue holds 32 pairs next to its 128 accumulators).
  using ColumnPair = std::uint32_t;
  // col is even, so a pair inside N is one aligned 4-byte load; only the last column of an odd N
  // is loaded alone. Each load sits under its own test and compiles to a predicated load, not a
  // branch. (A bf16 half-assignment instead would keep the halves in separate registers.)
  __device__ ColumnPair column_pair(int col, int n) const {
    std::uint32_t bits = 0;
    if (col + 1 < n) bits = __ldg(reinterpret_cast<const unsigned int*>(bias + col));
    if (col + 1 == n) bits = __ldg(reinterpret_cast<const unsigned short*>(bias + col));
    return bits;
  }

  __device__ float2 operator()(float2 value, ColumnPair bias_bits) const {
    // A bf16 is the upper half of the float with the same value.
    const float bias0 = __uint_as_float(bias_bits << 16);
    const float bias1 = __uint_as_float(bias_bits & 0xFFFF0000u);
    return make_float2(gelu_tanh(value.x + bias0), gelu_tanh(value.y + bias1));
  }
};

// Writes the results for C[row][col] and C[row][col + 1] (col is even), skipping what lies
// outside M x N. A pair is one 4-byte store when N is even; with N odd, rows start at odd element
// offsets, so the pair is stored as two halves.
template <class Activation>
__device__ __forceinline__ void store_pair(bf16* c, int m, int n, int row, int col, float2 acc,
                                           const LinearCombination& linear,
                                           const Activation& activation,
                                           typename Activation::ColumnPair columns) {
  if (row >= m || col >= n) return;
  bf16* destination = c + static_cast<std::size_t>(row) * n + col;
  const float2 value = activation(linear(acc, row, col), columns);
  if (col + 1 >= n) {
    *destination = __float2bfloat16_rn(value.x);
  } else if (n % 2 == 0) {
    *reinterpret_cast<__nv_bfloat162*>(destination) = __floats2bfloat162_rn(value.x, value.y);
  } else {
    destination[0] = __float2bfloat16_rn(value.x);
    destination[1] = __float2bfloat16_rn(value.y);
  }
}

// One 16 x 8 accumulator block of an mma.sync m16n8 (and of each 8-column slice of a WGMMA m64
// warp quarter): lane l holds rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1, as
// {c0, c1} (upper row) and {c2, c3} (lower row). The two rows share one column_pair fetch.
template <class Activation>
__device__ __forceinline__ void store_fragment_16x8(bf16* c, int m, int n, int row0, int col0,
                                                    const float* fragment,
                                                    const LinearCombination& linear,
                                                    const Activation& activation) {
  const int lane = threadIdx.x % 32;
  const int row = row0 + lane / 4;
  const int col = col0 + 2 * (lane % 4);
  const typename Activation::ColumnPair columns = activation.column_pair(col, n);
  store_pair(c, m, n, row, col, make_float2(fragment[0], fragment[1]), linear, activation, columns);
  store_pair(c, m, n, row + 8, col, make_float2(fragment[2], fragment[3]), linear, activation,
             columns);
}

}  // namespace kc::stage3
