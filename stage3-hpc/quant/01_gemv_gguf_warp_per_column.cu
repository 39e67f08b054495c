// Rung 01 of the GGUF GEMV — a warp per output column, the blocks decoded where they are read.
//
// Idea: decode is memory-bound on the weights: at M = 1 every weight byte is read once and used
// for one multiply-add per row of x. Reading llama.cpp's blocks as they are stored (18 bytes for 32
// q4_0 weights instead of 64 in bf16) moves 3.6x fewer bytes than a bf16 GEMV, and the decode —
// a scale, a nibble, a subtraction — is a few instructions per weight on CUDA cores, far below
// what the SMs can issue while the bytes stream in. One warp owns one output column n: lane l
// takes blocks l, l + 32, l + 64 ... of row n of w, decodes its 32 weights into FP32 and adds
// weight x x[m][k] into one FP32 accumulator per row of x (M <= 16), then a warp shuffle
// reduction sums the 32 lanes' partials and lane 0 writes y[m][n] in bf16.
//
// What this rung does not do yet (the limiter it leaves): the blocks are 18, 20 or 34 bytes, so
// only 2-byte (q4_0, q8_0) or 4-byte (q4_1) loads are aligned — a 16-byte vector load of a block
// is impossible in place. A lane issues 9-17 small loads per block, and neighbouring lanes read
// neighbouring blocks, so a warp's loads cover contiguous bytes (whole sectors) but as many
// instructions as 2- and 4-byte pieces: expect the load-issue rate, not DRAM, to limit it. The next
// rung repacks the blocks at load time (scales apart, quants in 16-byte rows) for LDG.128 loads,
// and then the tensor-core fragment layout (Marlin-style) for M = 16...64.
//
// SASS to look for: LDG.E.U16 / LDG.E (no LDG.E.128), I2F / HADD2.F32 for the decode, FFMA per
// weight and row, SHFL.BFLY for the reduction.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/01_warp_per_column
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ float half_at(const std::uint8_t* p) {  // p 2-byte aligned
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// The negative controls' mistakes (none in the rung itself): each byte's nibbles read in the wrong
// order (gemv_gguf_01_swapped_nibbles), or each block scaled by the d (and m) of the next block of
// its row, the last by the first's (gemv_gguf_01_next_block_scales: a block index off by one).
enum class Flaw { none, swapped_nibbles, next_block_scales };

// Weight i of a block of nibbles: element i < 16 in the low nibble of qs[i], i >= 16 in the high
// nibble of qs[i - 16] (kSwapped: the negative control's wrong order).
template <bool kSwapped>
__device__ int nibble(const std::uint8_t* qs, int i) {
  const unsigned byte = qs[i & 15];
  const bool high = (i >= 16) != kSwapped;
  return static_cast<int>(high ? byte >> 4 : byte & 15u);
}

template <GgufBlockType kType, Flaw kFlaw>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                const std::uint8_t* __restrict__ w, __nv_bfloat16* __restrict__ y) {
  constexpr int kBytes = gguf_block_bytes(kType);
  const int lane = threadIdx.x & 31;
  const int column = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (column >= n_cols) return;
  const int blocks = k_len / kGgufBlockWeights;
  const std::uint8_t* row = w + static_cast<std::size_t>(column) * blocks * kBytes;
  float acc[kGgufGemvMaxRows];
#pragma unroll
  for (int m = 0; m < kGgufGemvMaxRows; ++m) acc[m] = 0.f;

  for (int b = lane; b < blocks; b += 32) {
    const std::uint8_t* block = row + static_cast<std::size_t>(b) * kBytes;
    const std::uint8_t* scales =
        kFlaw == Flaw::next_block_scales ? row + static_cast<std::size_t>(b + 1 < blocks ? b + 1 : 0) * kBytes : block;
    float weight[kGgufBlockWeights];
    if constexpr (kType == GgufBlockType::q8_0) {
      const float d = half_at(scales);
      const std::int8_t* q = reinterpret_cast<const std::int8_t*>(block + 2);
#pragma unroll
      for (int i = 0; i < kGgufBlockWeights; ++i) weight[i] = d * static_cast<float>(q[i]);
    } else {
      const float d = half_at(scales);
      const float offset = kType == GgufBlockType::q4_1 ? half_at(scales + 2) : -8.f * d;
      const std::uint8_t* qs = block + (kType == GgufBlockType::q4_1 ? 4 : 2);
#pragma unroll
      for (int i = 0; i < kGgufBlockWeights; ++i)
        weight[i] = d * static_cast<float>(nibble<kFlaw == Flaw::swapped_nibbles>(qs, i)) + offset;
    }
    const int k0 = b * kGgufBlockWeights;
#pragma unroll
    for (int m = 0; m < kGgufGemvMaxRows; ++m) {
      if (m >= m_rows) break;
      const __nv_bfloat162* xs = reinterpret_cast<const __nv_bfloat162*>(x + static_cast<std::size_t>(m) * k_len + k0);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kGgufBlockWeights / 2; ++i) {
        const float2 pair = __bfloat1622float2(xs[i]);
        sum = fmaf(weight[2 * i], pair.x, fmaf(weight[2 * i + 1], pair.y, sum));
      }
      acc[m] += sum;
    }
  }
#pragma unroll
  for (int m = 0; m < kGgufGemvMaxRows; ++m) {
    if (m >= m_rows) break;
    float v = acc[m];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) y[static_cast<std::size_t>(m) * n_cols + column] = __float2bfloat16(v);
  }
}

template <Flaw kFlaw>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  require(a.m >= 1 && a.m <= kGgufGemvMaxRows && a.n >= 1 && a.k >= kGgufBlockWeights &&
              a.k % kGgufBlockWeights == 0,
          "GGUF GEMV: M must be in [1, {}], N >= 1 and K a positive multiple of 32 (got {}x{}x{})", kGgufGemvMaxRows,
          a.m, a.n, a.k);
  require(a.x != nullptr && a.w != nullptr && a.y != nullptr, "GGUF GEMV: x, w and y must be non-null");
  require(reinterpret_cast<std::uintptr_t>(a.x) % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.w) % 4 == 0,
          "GGUF GEMV: x and w must be 4-byte aligned");
  const dim3 grid(static_cast<unsigned>((a.n + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const dim3 block(kWarpsPerBlock * 32);
  switch (a.type) {
    case GgufBlockType::q4_0:
      gemv_kernel<GgufBlockType::q4_0, kFlaw><<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, a.w, a.y);
      break;
    case GgufBlockType::q4_1:
      gemv_kernel<GgufBlockType::q4_1, kFlaw><<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, a.w, a.y);
      break;
    case GgufBlockType::q8_0:
      gemv_kernel<GgufBlockType::q8_0, kFlaw><<<grid, block, 0, stream>>>(a.m, a.n, a.k, a.x, a.w, a.y);
      break;
    default:
      throw Error(fmt::format("GGUF GEMV: ggml type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", static_cast<int>(a.type)));
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_gguf_01_warp_per_column(const GgufGemvArgs& args, cudaStream_t stream) { launch<Flaw::none>(args, stream); }

void gemv_gguf_01_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<Flaw::swapped_nibbles>(args, stream);
}

// Declared in src/gemv_gguf_edges.hpp (the op's private header: no kernel file includes it).
void gemv_gguf_01_next_block_scales(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<Flaw::next_block_scales>(args, stream);
}

}  // namespace kc::stage3
