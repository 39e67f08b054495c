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

// Pair p (0..3) of the lane's 8 weights of one row and block, as bf16: nibbles (128 + q) or bytes.
template <GgufBlockType kType, bool kSwapped>
__device__ __forceinline__ std::uint32_t weight_pair(const std::uint32_t* words, int row_word, int p) {
  if constexpr (kType == GgufBlockType::q8_0) {
    return gguf_mma::byte_pair(make_uint2(words[2 * row_word], words[2 * row_word + 1]), p);
  } else {
    return gguf_mma::nibble_pair<kSwapped>(words[row_word], p);
  }
}

// __launch_bounds__(256, 1): given only the thread count, ptxas held some instances to 64
// registers and spilled 8-24 bytes inside the block loop (LDL/STL around the HMMAs; the SASS
// contracts refuse any spill in stage 3). A stated minimum of one CTA an SM lets it take the 53-102
// registers they need; 256 threads of up to 102 registers still fit two CTAs an SM.
template <GgufBlockType kType, int kRowGroups, bool kSwapped>
__global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_weights_as_a_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                             const uint4* __restrict__ quants, const uint4* __restrict__ scales,
                             __nv_bfloat16* __restrict__ y) {
  constexpr bool kBiased = kType != GgufBlockType::q8_0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int k_blocks = k_len / kGgufBlockWeights;
  const int chunks = (k_blocks + 3) / 4;
  const int tile = blockIdx.x;
  const std::uint32_t kOnes[4] = {gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair,
                                      gguf_mma::kBf16OnePair};
  const float zero[4] = {0.f, 0.f, 0.f, 0.f};

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
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int block = 4 * chunk + j;
      if (block >= k_blocks) break;  // the padding blocks of the last chunk: scale 0, x not read
      // A: the weights of rows g (h = 0) and g + 8 (h = 1); k 8t..8t+3 to the first k16, 8t+4.. to the second.
      const std::uint32_t a_first[4] = {weight_pair<kType, kSwapped>(words, 2 * j, 0),
                                        weight_pair<kType, kSwapped>(words, 2 * j + 1, 0),
                                        weight_pair<kType, kSwapped>(words, 2 * j, 1),
                                        weight_pair<kType, kSwapped>(words, 2 * j + 1, 1)};
      const std::uint32_t a_second[4] = {weight_pair<kType, kSwapped>(words, 2 * j, 2),
                                         weight_pair<kType, kSwapped>(words, 2 * j + 1, 2),
                                         weight_pair<kType, kSwapped>(words, 2 * j, 3),
                                         weight_pair<kType, kSwapped>(words, 2 * j + 1, 3)};
      float2 f_low, f_high;  // the scales of rows g and g + 8 for this block
      gguf_mma::block_factors<kType>(entries, j, f_low, f_high);
      const std::size_t k0 = static_cast<std::size_t>(block) * kGgufBlockWeights;
#pragma unroll
      for (int r = 0; r < kRowGroups; ++r) {
        const uint4 xv = row_valid[r] ? __ldg(reinterpret_cast<const uint4*>(x_row[r] + k0)) : make_uint4(0, 0, 0, 0);
        float c[4], c2[4];
        sm80::mma_m16n8k16_bf16_into(c, a_first, xv.x, xv.y, zero);
        sm80::mma_m16n8k16_bf16_into(c2, a_second, xv.z, xv.w, c);
        float s[4] = {0.f, 0.f, 0.f, 0.f};  // s[0], s[1]: the block's sums of x rows 8r + 2t, + 1
        if constexpr (kBiased) {
          float s1[4];
          sm80::mma_m16n8k16_bf16_into(s1, kOnes, xv.x, xv.y, zero);
          sm80::mma_m16n8k16_bf16_into(s, kOnes, xv.z, xv.w, s1);
        }
        // acc += d c + (off - 128 d) s, two FFMA an output (see block_product).
        acc[r][0] = fmaf(f_low.x, c2[0], fmaf(f_low.y, s[0], acc[r][0]));
        acc[r][1] = fmaf(f_low.x, c2[1], fmaf(f_low.y, s[1], acc[r][1]));
        acc[r][2] = fmaf(f_high.x, c2[2], fmaf(f_high.y, s[0], acc[r][2]));
        acc[r][3] = fmaf(f_high.x, c2[3], fmaf(f_high.y, s[1], acc[r][3]));
      }
    }
    current = next;
  }

  // The warps' partial sums meet in shared memory; thread (r, l, e) writes one output.
  __shared__ float partial[kWarps][kRowGroups][32][4];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][r][lane][e] = acc[r][e];
  __syncthreads();
  for (int index = threadIdx.x; index < kRowGroups * 128; index += kWarps * 32) {
    const int r = index / 128, l = (index / 4) % 32, e = index % 4;
    const int column = 16 * tile + (l >> 2) + 8 * (e >> 1);
    const int row = 8 * r + 2 * (l & 3) + (e & 1);
    if (row >= m_rows || column >= n_cols) continue;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][r][l][e];
    y[static_cast<std::size_t>(row) * n_cols + column] = __float2bfloat16(sum);
  }
}

template <GgufBlockType kType, bool kSwapped>
void launch_type(const GgufGemvArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.n + 15) / 16)), block(kWarps * 32);
  const auto* q = reinterpret_cast<const uint4*>(a.quants);
  const auto* s = static_cast<const uint4*>(a.scales);
  if (a.m > 8)
    gemv_weights_as_a_kernel<kType, 2, kSwapped><<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, q, s, a.y);
  else
    gemv_weights_as_a_kernel<kType, 1, kSwapped><<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, q, s, a.y);
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  constexpr const char* kRung = "weights as A";
  gguf_mma::check_fragment_args(a, kRung, "repack_gguf_blocks_for_mma16, layout=3");
  gguf_mma::dispatch_block_type(a.type, kRung,
                                [&](auto type) { launch_type<decltype(type)::value, kSwapped>(a, stream); });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_gguf_05_weights_as_a(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_05_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

}  // namespace kc::stage3
