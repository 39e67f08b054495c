// int4 quantize rung 06 — rung 05 with a CTA, not 16 lanes, for a group of more than 512 values,
// held in registers instead of read twice (sm_80 and newer).
//
// Idea: rungs 01 to 05 give a group of more than 512 values (G = 384, 640, ... up to one group a
// row, GPTQ's group size -1) 16 lanes, which walk it twice: once to fold its min and max, once
// more, after the shuffles, to pack it. At G = 4096 on a 4096-row matrix that is 4096 groups of
// 16 lanes: 256 CTAs of 256 threads for 132 SMs, each lane reading 32 chunks one after another,
// twice. Too few lanes for the bytes, and each byte read twice. Give such a group a CTA of 128
// threads instead: thread t takes chunks t, t + 128, ... (each load instruction of a warp reads
// 512 consecutive bytes, each store writes 128), holds up to eight of them in registers (a group
// of up to 8192 values is read once), folds them, and the CTA combines the threads' min and max
// through shared memory (a warp's shuffles, then one value a warp) and its finiteness with
// __syncthreads_or. Then every thread packs what it holds with rung 04's arithmetic. Past 8192
// values the chunks beyond the eighth a thread are folded as they stream and read again to be
// packed.
// What changed from rung 05: the launch for groups past 512 values (and 384); groups of 32 to 512
// values run rung 05.
// Expected limiter: DRAM bandwidth: a group of 4096 values is 4 chunks a thread, 64 bytes in flight
// a thread as in rung 04, on one CTA a group (4096 CTAs at 4096 x 4096).
//
// What to look for: in quantize_int4_cta_per_group_kernel eight predicated LDG.E.128 for the held
// chunks (more in the loops past them), one BAR.RED.OR (__syncthreads_or, also the barrier after
// the warps' STS of their range), rung 04's per value FMUL, FFMA, FFMA, FADD, FMNMX, FMNMX,
// coalesced STG.E; no local memory.
//
// Run just this rung:  kc-bench --filter stage3/quantize_int4/06
#include "quantize_int4_reciprocal.cuh"

namespace kc::stage3 {
namespace {

constexpr int kGroupThreads = 128;
constexpr int kHeldChunks = 8;  // a group of up to 128 x 8 x 8 = 8192 values is read once

__global__ void __launch_bounds__(kGroupThreads) quantize_int4_cta_per_group_kernel(QuantizeInt4Args a) {
  const long long group = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  const int chunks = a.group_size / 8;
  const long long base = group * a.group_size;  // the group's first value
  const auto load = [&](int j) { return __ldg(reinterpret_cast<const uint4*>(a.x + base + 8LL * j)); };
  const auto store = [&](int j, std::uint32_t word) {
    *reinterpret_cast<std::uint32_t*>(a.qweight + (base + 8LL * j) / 2) = word;
  };

  uint4 held[kHeldChunks] = {};
#pragma unroll
  for (int c = 0; c < kHeldChunks; ++c)
    if (t + c * kGroupThreads < chunks) held[c] = load(t + c * kGroupThreads);
  __nv_bfloat162 lo2 = __float2bfloat162_rn(0.f), hi2 = lo2;
#pragma unroll
  for (int c = 0; c < kHeldChunks; ++c)
    if (t + c * kGroupThreads < chunks) fold_chunk(held[c], lo2, hi2);
  for (int j = t + kHeldChunks * kGroupThreads; j < chunks; j += kGroupThreads) fold_chunk(load(j), lo2, hi2);

  // The CTA's range: each warp's by shuffles, then the four warps' through shared memory.
  const float2 lo_f = __bfloat1622float2(lo2), hi_f = __bfloat1622float2(hi2);
  const bool finite = isfinite(lo_f.x) && isfinite(lo_f.y) && isfinite(hi_f.x) && isfinite(hi_f.y);
  float lo = fminf(lo_f.x, lo_f.y), hi = fmaxf(hi_f.x, hi_f.y);
#pragma unroll
  for (int mask = 16; mask > 0; mask /= 2) {
    lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, mask));
    hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, mask));
  }
  __shared__ float warp_lo[kGroupThreads / 32], warp_hi[kGroupThreads / 32];
  if (t % 32 == 0) {
    warp_lo[t / 32] = lo;
    warp_hi[t / 32] = hi;
  }
  const bool all_finite = __syncthreads_or(!finite) == 0;  // also the barrier after the writes above
#pragma unroll
  for (int w = 0; w < kGroupThreads / 32; ++w) {
    lo = fminf(lo, warp_lo[w]);
    hi = fmaxf(hi, warp_hi[w]);
  }
  const Group g = group_from_range(lo, hi, all_finite);
  if (t == 0) {
    a.scales[group] = g.scale_bits;
    a.zeros[group] = static_cast<std::uint8_t>(g.zero);
  }

#pragma unroll
  for (int c = 0; c < kHeldChunks; ++c)
    if (t + c * kGroupThreads < chunks) store(t + c * kGroupThreads, pack<false, true>(held[c], g));
  for (int j = t + kHeldChunks * kGroupThreads; j < chunks; j += kGroupThreads)
    store(j, pack<false, true>(load(j), g));
}

}  // namespace

void quantize_int4_06_cta_per_long_group(const QuantizeInt4Args& a, cudaStream_t stream) {
  check_quantize_int4_args(a);
  if (int4_group_held_by_lanes(a.group_size)) {
    quantize_int4_05_next_group_in_flight(a, stream);
    return;
  }
  const long long groups = a.rows * (a.k / a.group_size);
  // One CTA a group on a one-dimensional grid (up to 2^31 - 1 CTAs: 2^40 values at G = 512).
  require(groups <= 0x7FFFFFFFLL, "quantize_int4: {} groups are more than a grid's 2^31 - 1 CTAs", groups);
  quantize_int4_cta_per_group_kernel<<<static_cast<unsigned>(groups), kGroupThreads, 0, stream>>>(a);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
