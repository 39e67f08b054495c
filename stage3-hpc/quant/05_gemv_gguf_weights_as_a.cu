// Rung 05 of the GGUF GEMV — the operands swapped: the weights are mma.sync's A operand, x its B.
//
// Idea: rungs 03 and 04 give mma.sync m16n8k16 the rows of x as A (16 rows, of which a decode step
// fills 1 to 16) and 8 output columns of w as B. At M = 1 fifteen of A's sixteen rows are zeros the
// lane still has to place in registers for every product, and each product covers 8 x 16 = 128
// weights. Profiled on the H200 (ncu on rung 03; the figures are in the stage-3 README), DRAM runs
// far below its peak while the SMs issue on most cycles — the rung issues instructions (register
// moves around the zero rows, the scales, the nibbles), it does not wait for memory. Swapping the roles (y^T = w . x^T) makes the weights
// A: 16 output columns x 16 k = 256 weights a product, and x B: its 8 columns are the M <= 8 rows
// of x exactly, one 16-byte load of x per lane and block and no zero registers to build (M of 9 to
// 16 takes a second B and a second product). The nibble decode per weight is the same; the
// products, the x loads and the sums of x per weight halve.
//
// The layout (layout=3, repack_gguf_blocks_for_mma16 in kc/stage3/gemv_gguf.hpp; the picture in
// kc/stage3/gemv_gguf_args.hpp): tiles of 16 rows x 128 k; lane (g, t) holds, for each of the 4
// blocks, its 8 weights (k 8t ... 8t+7) of rows g and g + 8 — two words, two 16-byte loads a lane
// and chunk. The k order and the scale arithmetic are rung 03's: c = x . (128 + q) on the tensor
// cores, s = the block's sum of x (one product of ones with x), y += d c + (off - 128 d) s.
//
// What changed from rung 03: the operand roles and with them the layout; one tile of 16 columns a
// CTA; the products through mma_m16n8k16_bf16_into, whose result registers are apart from its
// inputs (no moves to start a chain from zero). Loads as rung 03 (one chunk ahead in registers):
// rung 04's shared-memory pipeline did not speed rung 03 up, so it is not carried over.
//
// Expected limiter: fewer instructions a weight than rung 03, so nearer the DRAM stream; small
// matrices stay bound by the launch and the ramp, as a copy of the same bytes is.
//
// SASS to look for: LDG.E.128 for quants, scales and x; LOP3.LUT/SHF per nibble pair;
// HMMA.16816.F32.BF16 with no IMAD.MOV feeding it.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/05_weights_as_a
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "arch/sm80/mma.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 8;

// A lane's share of one chunk (4 blocks) of its tile: quants of rows g and g + 8, and the 8 scale
// entries (g, 2j + h) of row group g.
template <GgufBlockType kType>
struct Chunk {
  static constexpr int kQuantVectors = kType == GgufBlockType::q8_0 ? 4 : 2;
  static constexpr int kScaleVectors = kType == GgufBlockType::q4_1 ? 2 : 1;
  uint4 quants[kQuantVectors];
  uint4 scales[kScaleVectors];
};

template <GgufBlockType kType>
__device__ __forceinline__ void load_chunk(Chunk<kType>& r, const uint4* quants, const uint4* scales,
                                           std::size_t tile_chunk, int lane, bool valid) {
  using C = Chunk<kType>;
#pragma unroll
  for (int v = 0; v < C::kQuantVectors; ++v)
    r.quants[v] = valid ? __ldg(quants + (tile_chunk * 32 + lane) * C::kQuantVectors + v) : make_uint4(0, 0, 0, 0);
  const int g = lane >> 2;
#pragma unroll
  for (int v = 0; v < C::kScaleVectors; ++v)
    r.scales[v] = valid ? __ldg(scales + (tile_chunk * 8 + g) * C::kScaleVectors + v) : make_uint4(0, 0, 0, 0);
}

// __launch_bounds__(256, 1): given only the thread count, ptxas held some instances to 64
// registers and spilled 8-24 bytes inside the block loop (LDL/STL around the HMMAs; the SASS
// contracts refuse any spill in stage 3). A stated minimum of one CTA an SM lets it take the 53-102
// registers they need; 256 threads of up to 102 registers still fit two CTAs an SM.
template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped>
__global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_weights_as_a_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                             const uint4* __restrict__ quants, const uint4* __restrict__ scales,
                             __nv_bfloat16* __restrict__ y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int k_blocks = k_len / kGgufBlockWeights;
  const int chunks = (k_blocks + 3) / 4;
  const int tile = blockIdx.x;

  // acc[r][e]: rows (output columns) 16 tile + g (e < 2) and + 8 (e >= 2), x rows 8r + 2t + (e & 1).
  float acc[kRowGroups][4];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[r][e] = 0.f;
  // The x row this lane brings to B: row g (and g + 8 for the second group); rows past M read nothing.
  bool row_valid[kRowGroups];
  const __nv_bfloat16* x_row[kRowGroups];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r) {
    row_valid[r] = g + 8 * r < m_rows;
    x_row[r] = x + static_cast<std::size_t>(g + 8 * r) * k_len + 8 * t;
  }

  Chunk<kType> current, next;
  int chunk = warp;
  load_chunk(current, quants, scales, static_cast<std::size_t>(tile) * chunks + chunk, lane, chunk < chunks);
  for (; chunk < chunks; chunk += kWarps) {
    const int next_chunk = chunk + kWarps;
    load_chunk(next, quants, scales, static_cast<std::size_t>(tile) * chunks + next_chunk, lane, next_chunk < chunks);
    std::uint32_t words[4 * Chunk<kType>::kQuantVectors];
    std::memcpy(words, current.quants, sizeof words);
    std::uint32_t entries[4 * Chunk<kType>::kScaleVectors];
    std::memcpy(entries, current.scales, sizeof entries);
    gguf_mma::weights_as_a_chunk<kType, kRowGroups, kOneRow, kSwapped>(
        words, entries, chunk, k_blocks, row_valid,
        [&](int r, int, int block) {
          return __ldg(reinterpret_cast<const uint4*>(x_row[r] + static_cast<std::size_t>(block) * kGgufBlockWeights));
        },
        acc);
    current = next;
  }

  // The warps' partial sums meet in shared memory; thread (r, l, e) writes one output.
  __shared__ float partial[kWarps * kRowGroups * 32 * 4];
  gguf_mma::weights_as_a_reduce_and_store<kWarps, kRowGroups, kWarps * 32>(acc, true, partial, m_rows, n_cols, tile, y);
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  gguf_mma::launch_weights_as_a_rung(a, "weights as A", [&](auto type, auto row_groups, auto one_row) {
    const dim3 grid(static_cast<unsigned>((a.n + 15) / 16)), block(kWarps * 32);
    gemv_weights_as_a_kernel<decltype(type)::value, decltype(row_groups)::value, decltype(one_row)::value, kSwapped>
        <<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, reinterpret_cast<const uint4*>(a.quants),
                                     static_cast<const uint4*>(a.scales), a.y);
  });
}

}  // namespace

void gemv_gguf_05_weights_as_a(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_05_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

}  // namespace kc::stage3
