// int4 quantize rung 05 — rung 04 with a lane's next group loaded while it packs the current one:
// a grid that fits on the device at once, each lane walking groups with its loads one group ahead
// (sm_80 and newer).
//
// Idea: in rungs 02 to 04 a lane loads its 64 bytes, waits for them, does its arithmetic and
// stores, and only then does its CTA leave room for another; while a lane computes it has no load
// in flight, so the bytes in flight on the device are whatever the other resident warps happen to
// be waiting for. Once rung 04 has cut the arithmetic to a few instructions a value, the waits are
// what is left. Software pipelining in registers: launch only as many CTAs as the device holds at
// once (the occupancy calculator's CTAs an SM, times the SMs), and let each lane walk the groups
// with a stride of the whole grid; before it folds and packs group i it issues the loads of group
// i + stride into a second set of registers, so those 64 bytes travel while it computes. The
// arithmetic is rung 04's (pack<false, true> from quantize_int4_reciprocal.cuh), so the bytes
// written are the same.
// What changed from rung 04: the grid (resident CTAs only) and a loop over groups with the next
// group's chunks loaded before the current one is packed; 16 more registers a lane hold them.
// Groups of more than 512 values keep rung 04's two-pass launch.
// Expected limiter: DRAM bandwidth, if the extra registers do not cut the resident warps so far
// that the two groups in flight a lane hold fewer bytes than the one group of rung 04's extra warps.
//
// What to look for: eight LDG.E.128 in the loop body (four for the first group before it, four
// for the next inside), rung 04's per-value FMUL, FFMA, FFMA, FADD, FMNMX, FMNMX; no FSETP in the
// packing and no local memory; the register count against rung 04's (cuobjdump
// --dump-resource-usage).
//
// Run just this rung:  kc-bench --filter stage3/quantize_int4/05
#include <algorithm>

#include "kc/common/device.hpp"
#include "quantize_int4_reciprocal.cuh"

namespace kc::stage3 {
namespace {

// kLanes lanes a group, kHeld chunks a lane. Every lane of a warp runs the same number of loop
// trips (the warp's first group decides), so the shuffles in group_of always see the whole warp;
// lanes past the last group take part in them only.
template <int kLanes, int kHeld>
__global__ void __launch_bounds__(kThreads) quantize_int4_next_in_flight_kernel(QuantizeInt4Args a, long long groups) {
  const long long thread = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * (kThreads / kLanes);  // groups a step
  const int lane = static_cast<int>(thread % kLanes);
  const auto chunk_at = [&](long long group, int c) {
    return group * a.group_size + 8LL * (static_cast<long long>(c) * kLanes + lane);
  };
  const auto load_group = [&](long long group, uint4 (&chunks)[kHeld]) {
    if (group < groups) {
#pragma unroll
      for (int c = 0; c < kHeld; ++c) chunks[c] = __ldg(reinterpret_cast<const uint4*>(a.x + chunk_at(group, c)));
    }
  };

  long long group = thread / kLanes;
  long long warp_first = (thread & ~31LL) / kLanes;  // the warp's first group: the same in all its lanes
  uint4 current[kHeld] = {}, next[kHeld] = {};
  load_group(group, current);
  for (; warp_first < groups; warp_first += stride, group += stride) {
    load_group(group + stride, next);  // in flight while this group is packed
    const bool active = group < groups;
    __nv_bfloat162 lo = __float2bfloat162_rn(0.f), hi = lo;
    if (active) {
#pragma unroll
      for (int c = 0; c < kHeld; ++c) fold_chunk(current[c], lo, hi);
    }
    const Group g = group_of<kLanes>(lo, hi);
    if (active) {
      if (lane == 0) {
        a.scales[group] = g.scale_bits;
        a.zeros[group] = static_cast<std::uint8_t>(g.zero);
      }
      std::uint32_t packed[kHeld];
#pragma unroll
      for (int c = 0; c < kHeld; ++c) packed[c] = pack<false, true>(current[c], g);
      if constexpr (kLanes == 1) {  // G = 32: the lane's four chunks are its whole group
        *reinterpret_cast<uint4*>(a.qweight + group * a.group_size / 2) =
            make_uint4(packed[0], packed[1], packed[2], packed[3]);
      } else {
#pragma unroll
        for (int c = 0; c < kHeld; ++c)
          *reinterpret_cast<std::uint32_t*>(a.qweight + chunk_at(group, c) / 2) = packed[c];
      }
    }
#pragma unroll
    for (int c = 0; c < kHeld; ++c) current[c] = next[c];
  }
}

template <int kLanes, int kHeld>
void launch_next_in_flight(const QuantizeInt4Args& a, cudaStream_t stream) {
  const auto kernel = &quantize_int4_next_in_flight_kernel<kLanes, kHeld>;
  int ctas_per_sm = 0;
  KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas_per_sm, kernel, kThreads, 0));
  const long long groups = a.rows * (a.k / a.group_size);
  const auto needed = static_cast<long long>(core::ceil_div(groups * kLanes, kThreads));
  const long long resident = static_cast<long long>(std::max(ctas_per_sm, 1)) * current_device_sm_count();
  const auto grid = static_cast<unsigned>(std::min(needed, resident));
  kernel<<<grid, kThreads, 0, stream>>>(a, groups);
}

}  // namespace

void quantize_int4_05_next_group_in_flight(const QuantizeInt4Args& a, cudaStream_t stream) {
  check_quantize_int4_args(a);
  switch (a.group_size) {
    case 32: launch_next_in_flight<1, 4>(a, stream); break;
    case 64: launch_next_in_flight<2, 4>(a, stream); break;
    case 128: launch_next_in_flight<4, 4>(a, stream); break;
    case 256: launch_next_in_flight<8, 4>(a, stream); break;
    case 512: launch_next_in_flight<16, 4>(a, stream); break;
    default: quantize_int4_04_corrected_quotient(a, stream); return;  // rung 04's two passes
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
