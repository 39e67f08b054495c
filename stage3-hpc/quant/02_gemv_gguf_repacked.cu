// Rung 02 of the GGUF GEMV — the blocks repacked at load time, so every load is 16 bytes wide.
//
// Idea: rung 01 reads the blocks where the file put them. A block of 18, 20 or 34 bytes starts at
// any even address, so the widest aligned load into it is 2 bytes (q4_0, q8_0) or 4 (q4_1), and a
// lane issues 9 to 17 loads per block. An inference engine loads its weights once and runs them
// millions of times, so it can afford to lay them out for the kernel: repack_gguf_blocks()
// (kc/stage3/gemv_gguf.hpp), run once on the host, splits every block into its quants and its
// scales and writes them to two arrays (the picture: kc/stage3/gemv_gguf_args.hpp). Each block's
// quants now start on a 16-byte boundary: a lane fetches them with one 16-byte load (two for
// q8_0), and its d (q4_0, q8_0) or (d, m) pair (q4_1) with one 2- or 4-byte load. The weights are
// exactly as many bytes as before; only the number of instructions that move them changes.
//
// What changed from rung 01: the layout (the op's parameter layout=1) and the loads, nothing
// else. One warp still owns one output column n; lane l takes blocks l, l + 32, ... of row n, so
// a warp's quant loads cover 512 contiguous bytes (1 KiB for q8_0) and its scale loads 64 or 128.
// The decode is rung 01's (a scale, a nibble, the offset -8d or m, in FP32, the same nibble order)
// and so is the rest: one FP32 accumulator per row of x (M <= 16), a warp reduction per row
// (kc/core/reduce.cuh's warp_reduce_sum), lane 0 writes y[m][n] in bf16. The 32 values of x a
// block meets are read with four 16-byte loads per row (kc/core/vector_io.hpp's load_floats)
// instead of sixteen 4-byte ones; x is at most 16 x K bf16 and stays in L1/L2.
//
// Expected limiter: per block a lane now issues 2 (3 for q8_0) weight loads instead of 9-17, so at
// M = 1 the weight stream should become DRAM-bound, as a copy is. As M grows, the 4M loads of x and
// the 32M FMAs per block grow with it, and the CUDA cores' issue rate takes over: the next rung
// uses the tensor cores' fragment layout (Marlin-style) for M = 16...64. Not measured yet.
//
// SASS to look for: LDG.E.128 for the quants (and x), LDG.E.U16 (q4_0, q8_0) or LDG.E (q4_1) for
// the scales, no LDG.E.U8; FFMA per weight and row, SHFL.BFLY for the reduction.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/02_repacked
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "kc/common/error.hpp"
#include "kc/core/reduce.cuh"
#include "kc/core/vector_io.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kWarpsPerBlock = 8;

// The 32 quants of one block as integers, from its 16 bytes of nibbles: weight j < 16 in the low
// nibble of byte j, j >= 16 in the high nibble of byte j - 16 (kSwapped: the negative control's
// wrong order, low and high exchanged).
template <bool kSwapped>
__device__ __forceinline__ void unpack_nibbles(const uint4& bytes, int (&q)[kGgufBlockWeights]) {
  std::uint32_t words[4];
  std::memcpy(words, &bytes, sizeof words);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const std::uint32_t byte = (words[j / 4] >> (8 * (j % 4))) & 0xffu;
    const int low = static_cast<int>(byte & 15u), high = static_cast<int>(byte >> 4);
    q[j] = kSwapped ? high : low;
    q[j + 16] = kSwapped ? low : high;
  }
}

// The 32 quants of one q8_0 block, from its 32 signed bytes.
__device__ __forceinline__ void unpack_bytes(const uint4& first, const uint4& second, int (&q)[kGgufBlockWeights]) {
  std::int8_t bytes[kGgufBlockWeights];
  std::memcpy(bytes, &first, 16);
  std::memcpy(bytes + 16, &second, 16);
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i) q[i] = bytes[i];
}

template <GgufBlockType kType, bool kSwapped>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_repacked_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                         const std::uint8_t* __restrict__ quants, const void* __restrict__ scales,
                         __nv_bfloat16* __restrict__ y) {
  constexpr int kQuantBytes = gguf_quant_bytes(kType);
  const int lane = threadIdx.x & 31;
  const int column = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (column >= n_cols) return;
  const int blocks = k_len / kGgufBlockWeights;
  const std::size_t first_block = static_cast<std::size_t>(column) * blocks;
  const uint4* row_quants = reinterpret_cast<const uint4*>(quants + first_block * kQuantBytes);
  float acc[kGgufGemvMaxRows];
#pragma unroll
  for (int m = 0; m < kGgufGemvMaxRows; ++m) acc[m] = 0.f;

  for (int b = lane; b < blocks; b += 32) {
    // The block's loads: its quants in one or two 16-byte pieces, its scales in one access.
    int q[kGgufBlockWeights];
    float d, offset;
    // (Copies in registers first: unpacked straight from a reference into global memory, the
    // bytes would be fetched one by one.)
    if constexpr (kType == GgufBlockType::q8_0) {
      const uint4 first = row_quants[2 * b], second = row_quants[2 * b + 1];
      unpack_bytes(first, second, q);
      d = __half2float(static_cast<const __half*>(scales)[first_block + b]);
      offset = 0.f;
    } else if constexpr (kType == GgufBlockType::q4_1) {
      const uint4 nibbles = row_quants[b];
      unpack_nibbles<kSwapped>(nibbles, q);
      const float2 dm = __half22float2(static_cast<const __half2*>(scales)[first_block + b]);
      d = dm.x;
      offset = dm.y;
    } else {
      const uint4 nibbles = row_quants[b];
      unpack_nibbles<kSwapped>(nibbles, q);
      d = __half2float(static_cast<const __half*>(scales)[first_block + b]);
      offset = -8.f * d;
    }
    float weight[kGgufBlockWeights];
#pragma unroll
    for (int i = 0; i < kGgufBlockWeights; ++i) weight[i] = d * static_cast<float>(q[i]) + offset;

    const int k0 = b * kGgufBlockWeights;
#pragma unroll
    for (int m = 0; m < kGgufGemvMaxRows; ++m) {
      if (m >= m_rows) break;
      float xs[kGgufBlockWeights];
      core::load_floats<__nv_bfloat16, kGgufBlockWeights>(x + static_cast<std::size_t>(m) * k_len + k0, xs);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kGgufBlockWeights; ++i) sum = fmaf(weight[i], xs[i], sum);
      acc[m] += sum;
    }
  }
#pragma unroll
  for (int m = 0; m < kGgufGemvMaxRows; ++m) {
    if (m >= m_rows) break;
    const float v = core::warp_reduce_sum(acc[m]);
    if (lane == 0) y[static_cast<std::size_t>(m) * n_cols + column] = __float2bfloat16(v);
  }
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  require(a.m >= 1 && a.m <= kGgufGemvMaxRows && a.n >= 1 && a.k >= kGgufBlockWeights &&
              a.k % kGgufBlockWeights == 0,
          "GGUF GEMV (repacked): M must be in [1, {}], N >= 1 and K a positive multiple of 32 (got {}x{}x{})",
          kGgufGemvMaxRows, a.m, a.n, a.k);
  require(a.x != nullptr && a.quants != nullptr && a.scales != nullptr && a.y != nullptr,
          "GGUF GEMV (repacked): x, quants, scales and y must be non-null (the repacked layout: "
          "repack_gguf_blocks, layout=1)");
  require(core::is_aligned(a.x, 16) && core::is_aligned(a.quants, 16),
          "GGUF GEMV (repacked): x and quants must be 16-byte aligned (they are read in 16-byte pieces)");
  require(core::is_aligned(a.scales, static_cast<std::size_t>(gguf_scale_bytes(a.type))),
          "GGUF GEMV (repacked): scales must be {}-byte aligned", gguf_scale_bytes(a.type));
  const dim3 grid(static_cast<unsigned>((a.n + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const dim3 block(kWarpsPerBlock * 32);
  switch (a.type) {
    case GgufBlockType::q4_0:
      gemv_repacked_kernel<GgufBlockType::q4_0, kSwapped>
          <<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, a.quants, a.scales, a.y);
      break;
    case GgufBlockType::q4_1:
      gemv_repacked_kernel<GgufBlockType::q4_1, kSwapped>
          <<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, a.quants, a.scales, a.y);
      break;
    case GgufBlockType::q8_0:
      gemv_repacked_kernel<GgufBlockType::q8_0, kSwapped>
          <<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, a.quants, a.scales, a.y);
      break;
    default:
      throw Error(fmt::format("GGUF GEMV (repacked): ggml type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)",
                              static_cast<int>(a.type)));
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_gguf_02_repacked(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_02_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

}  // namespace kc::stage3
