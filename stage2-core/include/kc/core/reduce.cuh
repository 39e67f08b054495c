// kc/core/reduce.cuh — warp and block reductions: sum, max, and the (max, sum) pair of softmax.
//
// Hand-written on purpose: they are the lesson of stage 2 (CUB's BlockReduce does the same job and
// serves as the peer of the plain row reductions; see README.md).
//
//   warp level   five __shfl_xor_sync butterfly steps: every lane ends with the warp's result,
//                no shared memory, no __syncthreads.
//   block level  each warp reduces its own values, lane 0 of every warp parks its partial in
//                shared memory, one __syncthreads, then every warp reduces the (at most 32)
//                partials itself, so the result needs no second broadcast through shared memory.
//
// Max propagates NaN (PTX max.NaN, sm_80+): the maximum of a row holding a NaN is NaN, as in
// torch.amax; fmaxf would silently drop it.
//
// The (max, sum) pair is online softmax's state: `sum` is a sum of exp(x - max) over the values
// seen so far. Two states combine by rescaling each sum to the larger max. The rescale factor is
// taken as exactly 1 when a state's max already is the combined max, so that two empty states
// (-inf, 0) combine to (-inf, 0) instead of to exp(-inf - -inf) = NaN.
//
// The same pair can be reduced in two ways. MaxSumOp combines whole pairs at every shuffle step
// (two exps per step). MaxThenSum lets the lanes agree on the maximum first, rescales each lane's
// sum once, then adds the sums: one exp per lane and none inside the shuffle chains, for kernels
// whose instruction count is their limiter (softmax rung 06).
#pragma once

#ifndef __CUDACC__
#error "kc/core/reduce.cuh holds device code: include it from .cu files compiled by nvcc"
#endif

#include <cuda_runtime.h>

#include <math_constants.h>

namespace kc::core {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ __forceinline__ float max_propagate_nan(float a, float b) {
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  static __device__ __forceinline__ float identity() { return 0.f; }
};

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return max_propagate_nan(a, b);
  }
  static __device__ __forceinline__ float identity() { return -CUDART_INF_F; }
};

// A running sum with Kahan's compensation, for a thread that adds a whole row by itself. A plain
// float running sum over n terms drifts by up to ~n*eps (1.5e-4 relative for 40000 equal terms,
// measured); the compensated sum stays near 2*eps. Tree reductions (warp and block level) get
// ~log2(n)*eps for free, which is one more reason the later rungs use them. NaN and Inf propagate
// as in a plain sum: once the sum is infinite the compensation is held at 0 (inf - inf would
// turn it, and then the sum, into NaN).
struct CompensatedSum {
  float sum = 0.f;
  float compensation = 0.f;  // the low-order bits lost by the last additions, negated
  __device__ __forceinline__ void add(float value) {
    const float corrected = value - compensation;
    const float next = sum + corrected;
    compensation = isfinite(next) ? (next - sum) - corrected : 0.f;
    sum = next;
  }
  __device__ __forceinline__ float value() const { return sum; }
};

// e^x in one MUFU.EX2 (plus the multiply by log2(e)), results below 2^-126 flushed to zero.
// __expf compiles to ex2.approx.f32 unless the whole file is built with -ftz=true, and for that
// instruction nvcc wraps every exp in a fix-up for subnormal results: a compare, predicate logic
// and two predicated multiplies, six instructions around the one that does the work (counted in
// the SASS of softmax rung 05). Flushing changes an exp below 1.2e-38 into 0, an absolute error
// far below every tolerance; exp(-inf) is still exactly 0 and NaN stays NaN.
__device__ __forceinline__ float exp_flush_to_zero(float x) {
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x * CUDART_L2E_F));
  return result;
}

// Online-softmax state: the running maximum and the sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

// exp(from - to), with exp(-inf - -inf) and exp(inf - inf) taken as 1 when from == to.
__device__ __forceinline__ float rescale_factor(float from, float to) {
  return from == to ? 1.f : __expf(from - to);
}

struct MaxSumOp {
  __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float max = max_propagate_nan(a.max, b.max);
    return {max, a.sum * rescale_factor(a.max, max) + b.sum * rescale_factor(b.max, max)};
  }
  static __device__ __forceinline__ MaxSum identity() { return {-CUDART_INF_F, 0.f}; }
};

// Adds one value to an online-softmax state: when x raises the maximum, the sum so far is
// rescaled to the new maximum. One exp per value, plus one per new maximum. A -inf contributes 0
// (even to a state whose maximum is -inf); a +inf makes the sum exp(inf - inf) = NaN, as in the
// max-subtracted formula, and a NaN makes it NaN.
__device__ __forceinline__ MaxSum online_softmax_update(MaxSum state, float x) {
  if (x > state.max) {
    state.sum *= __expf(state.max - x);
    state.max = x;
  }
  state.sum += x == -CUDART_INF_F ? 0.f : __expf(x - state.max);
  return state;
}

__device__ __forceinline__ float shuffle_xor(float value, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, value, lane_mask);
}

// Doubles shuffle as two 32-bit halves (the FP64 references reduce with the same templates).
__device__ __forceinline__ double shuffle_xor(double value, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, value, lane_mask);
}

__device__ __forceinline__ MaxSum shuffle_xor(MaxSum value, int lane_mask) {
  return {__shfl_xor_sync(kFullWarpMask, value.max, lane_mask),
          __shfl_xor_sync(kFullWarpMask, value.sum, lane_mask)};
}

// Butterfly reduction over the 32 lanes of a warp; every lane returns the result. All 32 lanes
// must call it (lanes without data pass Op::identity()).
template <typename Value, class Op>
__device__ __forceinline__ Value warp_reduce(Value value, Op op) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2)
    value = op(value, shuffle_xor(value, lane_mask));
  return value;
}

__device__ __forceinline__ float warp_reduce_sum(float value) { return warp_reduce(value, SumOp{}); }
__device__ __forceinline__ float warp_reduce_max(float value) { return warp_reduce(value, MaxOp{}); }
__device__ __forceinline__ MaxSum warp_reduce_max_sum(MaxSum value) {
  return warp_reduce(value, MaxSumOp{});
}

// The (max, sum) reduction of warp_reduce(value, MaxSumOp{}), in two plain butterflies: the
// maximum M first, then the sum of each lane's sum rescaled once to M. Chosen by overload
// resolution wherever a reduction (warp_reduce, block_reduce, Team::reduce) is given MaxThenSum.
// Lanes without data pass MaxThenSum::identity() = (-inf, 0). The same NaN/Inf rules as
// MaxSumOp: a NaN maximum makes every sum NaN; a lane whose maximum is -inf adds 0.
struct MaxThenSum {
  static __device__ __forceinline__ MaxSum identity() { return {-CUDART_INF_F, 0.f}; }
};

// exp(from - to) as rescale_factor(), with the flushing exp.
__device__ __forceinline__ float rescale_factor_flush_to_zero(float from, float to) {
  return from == to ? 1.f : exp_flush_to_zero(from - to);
}

__device__ __forceinline__ MaxSum warp_reduce(MaxSum value, MaxThenSum) {
  const float max = warp_reduce_max(value.max);
  return {max, warp_reduce_sum(value.sum * rescale_factor_flush_to_zero(value.max, max))};
}

// Reduction over the whole block; every thread returns the result. blockDim.x must be a multiple
// of 32 (at most 1024) and every thread must call it. `warp_partials` is a __shared__ array of 32
// values that this call uses alone: a kernel that reduces once, or once per array, needs only the
// barrier that publishes the partials.
template <typename Value, class Op>
__device__ __forceinline__ Value block_reduce_once(Value value, Op op, Value* warp_partials) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  value = warp_reduce(value, op);
  if (lane == 0) warp_partials[warp] = value;
  __syncthreads();
  value = lane < warps ? warp_partials[lane] : Op::identity();
  return warp_reduce(value, op);
}

// block_reduce_once for a `warp_partials` array the next call may reuse: a trailing barrier keeps
// a fast warp from overwriting partials that a slow warp has not read yet.
template <typename Value, class Op>
__device__ __forceinline__ Value block_reduce(Value value, Op op, Value* warp_partials) {
  value = block_reduce_once(value, op, warp_partials);
  __syncthreads();
  return value;
}

__device__ __forceinline__ float block_reduce_sum(float value, float* warp_partials) {
  return block_reduce(value, SumOp{}, warp_partials);
}
__device__ __forceinline__ float block_reduce_max(float value, float* warp_partials) {
  return block_reduce(value, MaxOp{}, warp_partials);
}
__device__ __forceinline__ MaxSum block_reduce_max_sum(MaxSum value, MaxSum* warp_partials) {
  return block_reduce(value, MaxSumOp{}, warp_partials);
}

}  // namespace kc::core
