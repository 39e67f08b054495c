// epilogue_direct_store.cuh — the epilogue of rungs 04-08 (and the fallback of rungs 09-10 when
// the rows of C are not 16-byte multiples, which TMA cannot store): each thread of a warpgroup
// writes the outputs its WGMMA accumulators hold straight to C, as bf16 pairs guarded at the
// edges. Simple and register-only, but each warp store covers 8 rows x 16 bytes, half of eight
// 32-byte sectors: what rung 09's epilogue (epilogue_tma_store.cuh) improves on.
#pragma once

#include "epilogue.cuh"
#include "hopper_common.cuh"

namespace kc::stage3 {

#if KC_STAGE3_SM90A

// Writes a warpgroup's 64 x 256 accumulators (rows row0.., columns col0..) straight from registers
// to C, guarded at the edges. Each 8-column slice of a warp is one m16n8 fragment.
template <class Activation>
__device__ __forceinline__ void store_accumulators_direct(bf16* c, int m, int n, int row0, int col0,
                                                          const float (&acc)[kAccumulators],
                                                          const LinearCombination& linear,
                                                          const Activation& activation) {
  const int warp_row0 = row0 + 16 * ((threadIdx.x % kWarpgroupThreads) / 32);
#pragma unroll
  for (int j = 0; j < kHopperBlockN / 8; ++j)
    store_fragment_16x8(c, m, n, warp_row0, col0 + 8 * j, &acc[4 * j], linear, activation);
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3
