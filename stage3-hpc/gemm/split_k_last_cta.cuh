// split_k_last_cta.cuh — the split-K reduction of the rungs whose CTAs split K and whose last CTA
// to finish adds the splits — hgemm rungs 14 and 15 (rung 14's header tells the idea), the GGUF
// GEMV's rungs 09 and 10 (quant/09_gemv_gguf_batch.cu, quant/10_gemv_gguf_wgmma.cu), and, per
// consumer warpgroup, the split last wave of grouped GEMM rung 06 —
// and the hgemm rungs' store of the swapped product's fragments into C (the GGUF rungs pass a
// `store` of their own, into y).
//
// A CTA owns a column block and a slice of K. With one split it stores its own sums. With more,
// each thread writes its float4 fragments to the CTA's slot of the workspace in fragment order, the
// CTA makes them visible (__threadfence) and counts itself in its column block's counter
// (atomicAdd); the CTA whose count reaches `splits` is the last: it adds every slot in split order
// (its own from registers, the others from L2) and stores the sums, then sets the counter back to
// zero for the next launch. The additions are in a fixed order, so the result has the same bits
// whichever CTA finishes last. No second kernel, no atomics on the data, no CTA waits for another.
//
// The slot layout: fragment f of lane l of warp w at float4 (w x kFragments + f) x 32 + l, so one
// warp's store of one fragment is 512 contiguous bytes and every thread of the last CTA reads back
// exactly the positions it holds itself.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "hgemm.hpp"

namespace kc::stage3::split_k {

// The float4 fragments a thread holds; `holds` is false in warps without any (a producer warp),
// which still take part in the CTA's barriers.
template <int kFragments>
struct ThreadFragments {
  float4 value[kFragments];
  bool holds = true;
};

__device__ __forceinline__ float4 add(float4 x, float4 y) {
  return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

// Who takes part in one reduction: the whole CTA (the small-M and GGUF rungs), or one consumer
// warpgroup of the warp-specialized kernel (grouped GEMM rung 06, whose producer warpgroup runs
// ahead on the next tile and must not be waited for). thread() numbers the team's threads from 0,
// sync() is the team's barrier, sync_or(p) its barrier that returns whether p held in any thread.
struct CtaTeam {
  __device__ __forceinline__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  __device__ __forceinline__ bool sync_or(bool p) const { return __syncthreads_or(p); }
};

// A warpgroup of 128 threads on named barrier `barrier_id` (bar.sync and bar.red.or on it).
struct WarpgroupTeam {
  int barrier_id;
  __device__ __forceinline__ int thread() const { return static_cast<int>(threadIdx.x % 128); }
  __device__ __forceinline__ void sync() const {
    asm volatile("bar.sync %0, 128;" ::"r"(barrier_id) : "memory");
  }
  __device__ __forceinline__ bool sync_or(bool p) const {
    std::uint32_t any;
    asm volatile(
        "{\n\t.reg .pred in, out;\n\t"
        "setp.ne.u32 in, %1, 0;\n\t"
        "barrier.red.or.pred out, %2, 128, in;\n\t"
        "selp.u32 %0, 1, 0, out;\n\t}"
        : "=r"(any)
        : "r"(static_cast<std::uint32_t>(p)), "r"(barrier_id)
        : "memory");
    return any != 0;
  }
};

// Every thread of the team (by default the CTA) calls this after its K slice; it returns whether
// this team was the last to arrive (and has stored the sums). `block_slots` is the first slot of the
// CTA's column block (splits slots of kSlotVectors float4s each), `counter` the block's arrival
// counter (zero before the launch). store(f, sum) stores fragment f's sums; in the CTA that arrives
// last only. kAddsFirstSplitTwice is a negative control's flaw (split 0 added twice); false in the
// rungs. kFragmentsAtOnce: how many fragments the last CTA adds up together, their loads of a split
// in flight at once — by default all of them (one L2 round trip a split); fewer where registers
// are short: each fragment at once holds a sum and a partial (8 registers), and in the GGUF rungs
// a CTA an SM lost to registers would change their plan's splits, and so their bits.
// kOwnSplitFromRegisters: the last team adds its own split from `mine` (by default) or reads it back
// from its slot like the others, so that `mine` is dead once stored — where the registers are full
// (grouped rung 06: 128 accumulators a thread).
template <int kFragments, int kSlotVectors, bool kAddsFirstSplitTwice = false, int kFragmentsAtOnce = kFragments,
          bool kOwnSplitFromRegisters = true, class Team = CtaTeam, class Store>
__device__ __forceinline__ bool reduce_in_last_cta(const ThreadFragments<kFragments>& mine, float4* block_slots,
                                                   int split, int splits, std::uint32_t* counter, Store&& store,
                                                   Team team = Team{}) {
  static_assert(kFragments % kFragmentsAtOnce == 0, "the fragments come in whole groups");
  const int warp = team.thread() / 32, lane = team.thread() % 32;
  const int slot_base = warp * kFragments * 32 + lane;
  if (mine.holds) {
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
      __stcg(block_slots + split * kSlotVectors + slot_base + 32 * f, mine.value[f]);
  }
  // Arrive: this thread's partials are visible to the whole GPU before the CTA is counted (the
  // fence), and every thread's are before thread 0 counts it (the barrier).
  __threadfence();
  team.sync();
  bool last = false;
  if (team.thread() == 0) last = atomicAdd(counter, 1u) == static_cast<unsigned>(splits - 1);
  if (!team.sync_or(last)) return false;
  __threadfence();  // the other CTAs' partials, seen through their count, are read after it
  if (team.thread() == 0) *counter = 0;  // every CTA of the block has counted: ready for the next launch
  if (!mine.holds) return true;
  // Group by group of kFragmentsAtOnce fragments, split by split, all of the group's fragments of a
  // slot at once: kFragmentsAtOnce independent L2 loads in flight for each split instead of one
  // chain of loads a fragment (splits round trips a group, not kFragments x splits); every fragment
  // still adds the splits in split order.
#pragma unroll
  for (int first = 0; first < kFragments; first += kFragmentsAtOnce) {
    float4 sum[kFragmentsAtOnce];
#pragma unroll
    for (int i = 0; i < kFragmentsAtOnce; ++i) sum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < splits; ++s) {
      float4 partial[kFragmentsAtOnce];
#pragma unroll
      for (int i = 0; i < kFragmentsAtOnce; ++i) {
        const int f = first + i;
        // __ldcg: from L2, where the other CTAs' stores and fences put them (not a stale L1 line).
        if constexpr (kOwnSplitFromRegisters)
          partial[i] = s == split ? mine.value[f] : __ldcg(block_slots + s * kSlotVectors + slot_base + 32 * f);
        else
          partial[i] = __ldcg(block_slots + s * kSlotVectors + slot_base + 32 * f);
      }
#pragma unroll
      for (int i = 0; i < kFragmentsAtOnce; ++i) {
        sum[i] = add(sum[i], partial[i]);
        if (kAddsFirstSplitTwice && s == 0) sum[i] = add(sum[i], partial[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kFragmentsAtOnce; ++i) store(first + i, sum[i]);
  }
  return true;
}

// C[m][n] = alpha . sum + beta . C[m][n] for an output inside M x N; nothing outside.
__device__ __forceinline__ void store_output(const HgemmArgs& args, int m, int n, float sum) {
  if (m >= args.m || n >= args.n) return;
  bf16* destination = args.c + static_cast<std::size_t>(m) * args.ldc + n;
  float value = args.alpha * sum;
  if (args.beta != 0.f) value += args.beta * __bfloat162float(*destination);  // BLAS: C unread when beta == 0
  *destination = __float2bfloat16_rn(value);
}

// A 16 x 8 fragment of C^T (the swapped product: rows = output columns n, columns = tokens m) in
// mma.sync's C layout, which is also WGMMA's accumulator layout per 8-column slice: lane (g, t)
// holds {C[m0][n0], C[m0 + 1][n0], C[m0][n0 + 8], C[m0 + 1][n0 + 8]} with n0 = first column + g and
// m0 = first token + 2t.
__device__ __forceinline__ void store_transposed_fragment(const HgemmArgs& args, int n0, int m0, float4 sum) {
  store_output(args, m0, n0, sum.x);
  store_output(args, m0 + 1, n0, sum.y);
  store_output(args, m0, n0 + 8, sum.z);
  store_output(args, m0 + 1, n0 + 8, sum.w);
}

}  // namespace kc::stage3::split_k
