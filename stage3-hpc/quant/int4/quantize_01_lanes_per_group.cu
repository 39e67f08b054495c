// int4 quantize rung 01 — bf16 weights to 4-bit groups with a scale and a zero point each (the
// stored form of kc/stage3/gemv_int4_args.hpp), what an engine runs once when it quantizes a bf16
// checkpoint at load time (sm_80 and newer).
//
// Idea: a group of G values needs its min and max before any value can be quantized, and the
// values are contiguous, so give a group a few lanes that each hold 8 values from one 16-byte
// load: 4 lanes for G = 32, 8 for G = 64, 16 (half a warp) from G = 128, each of those lanes then
// taking G / 128 steps of 8. The lanes fold their min and max by XOR shuffles inside the group
// (lanes of a group are aligned inside the warp, so the shuffles never cross groups), the first
// lane writes the group's half scale and zero point, and every lane packs its 8 nibbles into one
// 32-bit word (value e at bits 4e: the low nibble of byte e / 2 for even e) and stores it — a
// group's lanes write contiguous words. Up to G = 512 the values stay in registers between the
// fold and the quantize; larger groups read their values again (from the caches) in a second pass.
// The arithmetic per group is the host reference's (int4_group_scale, int4_quantize_value in
// kc/stage3/quantize_int4_args.hpp: IEEE division, rint), so the bytes must match it exactly.
//
// Expected limiter: DRAM bandwidth — 2 bytes read a value, a little over half a byte written —
// once the per-value work (a division, a rint, two clamps, a shift and an OR) fits the issue
// budget of about 20 instructions a value at the H200's bandwidth (the GGUF quantize's rung 02
// header works that budget out).
//
// What to look for: LDG.E.128 (one a lane a step), SHFL.BFLY for the fold, the division's MUFU.RCP
// and its refinement (a call to the slow path for the rare operands it cannot take), FRND for rint,
// F2I.TRUNC.NTZ, STG.E for the packed word; no local memory.
//
// Run just this rung:  kc-bench --filter stage3/quantize_int4/01
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/stage3/quantize_int4_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;

// 8 bf16 values from one 16-byte load, as floats (exact).
__device__ __forceinline__ void load_eight(const __nv_bfloat16* x, long long offset, float (&v)[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(x + offset));
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair;
    pair = *reinterpret_cast<const __nv_bfloat162*>(&words[i]);
    const float2 f = __bfloat1622float2(pair);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ void fold(const float (&v)[8], float& lo, float& hi, bool& finite) {
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    finite = finite && isfinite(v[e]);
    lo = fminf(lo, v[e]);
    hi = fmaxf(hi, v[e]);
  }
}

// The 8 nibbles of one lane's values as a word: value e at bits 4e.
__device__ __forceinline__ std::uint32_t pack(const float (&v)[8], bool valid, float scale, int zero) {
  std::uint32_t word = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int q = valid ? int4_quantize_value(v[e], scale, zero) : 0;
    word |= static_cast<std::uint32_t>(q) << (4 * e);
  }
  return word;
}

// kLanesPerGroup lanes a group, kSteps steps of 8 values a lane (G = 8 x kLanesPerGroup x
// kSteps); kSteps == 0: `steps` from the group size at run time, and two passes over the values.
template <int kLanesPerGroup, int kSteps>
__global__ void __launch_bounds__(kThreads) quantize_int4_kernel(QuantizeInt4Args a, long long groups, int steps) {
  constexpr bool kInRegisters = kSteps > 0;
  constexpr int kHeld = kInRegisters ? kSteps : 1;
  const int step_count = kInRegisters ? kSteps : steps;
  const long long thread = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long group = thread / kLanesPerGroup;
  const int lane_in_group = static_cast<int>(thread % kLanesPerGroup);
  // Every lane of a warp takes part in the shuffles; those past the last group fold nothing.
  const bool active = group < groups;
  const long long base = group * a.group_size;
  const auto offset = [&](int s) { return base + 8LL * (kLanesPerGroup * s + lane_in_group); };

  float held[kHeld][8] = {};
  float lo = 0.f, hi = 0.f;
  bool finite = true;
#pragma unroll
  for (int s = 0; s < step_count; ++s) {
    float v[8] = {};
    if (active) {
      load_eight(a.x, offset(s), v);
      fold(v, lo, hi, finite);
    }
    if constexpr (kInRegisters) {
#pragma unroll
      for (int e = 0; e < 8; ++e) held[s][e] = v[e];
    }
  }
#pragma unroll
  for (int mask = kLanesPerGroup / 2; mask > 0; mask /= 2) {
    lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, mask));
    hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, mask));
    finite = __shfl_xor_sync(0xffffffffu, static_cast<int>(finite), mask) != 0 && finite;
  }
  if (!active) return;
  std::uint16_t scale_bits = kInt4InvalidScaleBits;
  float scale = 0.f;
  int zero = 0;
  const bool valid = finite && int4_group_scale(lo, hi, scale_bits, scale, zero);
  if (lane_in_group == 0) {
    a.scales[group] = valid ? scale_bits : kInt4InvalidScaleBits;
    a.zeros[group] = static_cast<std::uint8_t>(valid ? zero : 0);
  }
#pragma unroll
  for (int s = 0; s < step_count; ++s) {
    float v[8];
    if constexpr (kInRegisters) {
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = held[s][e];
    } else {
      load_eight(a.x, offset(s), v);
    }
    *reinterpret_cast<std::uint32_t*>(a.qweight + offset(s) / 2) = pack(v, valid, scale, zero);
  }
}

template <int kLanesPerGroup, int kSteps>
void launch(const QuantizeInt4Args& a, cudaStream_t stream) {
  const long long groups = a.rows * (a.k / a.group_size);
  const auto grid = static_cast<unsigned>(core::ceil_div(groups * kLanesPerGroup, kThreads));
  const int steps = a.group_size / (8 * kLanesPerGroup);
  quantize_int4_kernel<kLanesPerGroup, kSteps><<<grid, kThreads, 0, stream>>>(a, groups, steps);
}

}  // namespace

void quantize_int4_01_lanes_per_group(const QuantizeInt4Args& a, cudaStream_t stream) {
  check_quantize_int4_args(a);
  switch (a.group_size) {
    case 32: launch<4, 1>(a, stream); break;
    case 64: launch<8, 1>(a, stream); break;
    case 128: launch<16, 1>(a, stream); break;
    case 256: launch<16, 2>(a, stream); break;
    case 512: launch<16, 4>(a, stream); break;
    default: launch<16, 0>(a, stream); break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
