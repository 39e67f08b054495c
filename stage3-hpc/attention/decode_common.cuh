// decode_common.cuh — what the paged decode rungs share: the checks before a launch, which keys a
// new token sees, where a key's row lives in the paged cache, and the combine kernel that merges
// the splits of a flash-decoding rung (rungs 02 and 03). The online softmax pieces (exp2, the -inf
// base, a finished row) are the prefill ladder's, from flash_common.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "arch/util.hpp"
#include "kc/stage3/decode_args.hpp"
#include "attention/flash_common.cuh"
#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.cuh"
#include "kc/core/reduce.cuh"
#include "kc/core/vector_io.hpp"

namespace kc::stage3 {

// A 16-byte piece of a row: 8 elements of a 16-bit type, what one LDG.E.128 / LDGSTS.128 moves.
inline constexpr int kDecodeChunkElements = 8;

// Keys new token `token` of a sequence of `length` keys sees: clamp(length - (Sq - 1 - token), 0,
// length) (attention_decode.hpp's decode_visible_keys). Keys j < this are visible.
__device__ __forceinline__ int decode_visible_keys(int length, int q_len, int token) {
  const int end = length - (q_len - 1 - token);
  return end < 0 ? 0 : end;  // never above length: token < q_len
}

// Row `row` (0 .. block_size - 1) of kv head `kv_head` in block `block` of a pool laid out
// [num_blocks, kv_heads, block_size, D].
template <typename T>
__device__ __forceinline__ const T* page_row(const T* pool, std::int32_t block, int kv_head, int row,
                                             const DecodeArgs<T>& args) {
  const std::int64_t page = static_cast<std::int64_t>(block) * args.kv_heads + kv_head;
  return pool + (page * args.block_size + row) * args.head_dim;
}

// Checks a split plan against a flash-decoding launch (rungs 02 and 03 take the same plans): the
// row chunks of kDecodeMaxRowsPerCta rows, splits of whole 64-key tiles that cover the table's keys,
// a grid that fits, a workspace when splits are merged.
template <typename T>
void require_decode_split_plan(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                               const DecodeSplitWorkspace& workspace, const char* rung) {
  const DecodeSplitPlan expected = decode_plan_with_splits(args.group_rows(), args.max_keys(), plan.splits);
  require(plan.splits >= 1 && plan.row_chunks == expected.row_chunks &&
              static_cast<std::int64_t>(plan.splits) * plan.keys_per_split >= args.max_keys() &&
              plan.keys_per_split % kDecodeSplitKeyMultiple == 0,
          "{}: the split plan ({} splits of {} keys, {} row chunks) does not cover {} keys and {} rows "
          "a group: make it with plan_decode_splits, plan_decode_splits_in_waves or decode_plan_with_splits",
          rung, plan.splits, plan.keys_per_split, plan.row_chunks, args.max_keys(), args.group_rows());
  require(args.batch <= 65535 && static_cast<std::int64_t>(args.kv_heads) * plan.row_chunks <= 65535,
          "{}: the grid holds sequences in z and kv heads x row chunks in y: B = {} and Hkv x {} = {} "
          "must be <= 65535",
          rung, args.batch, plan.row_chunks, static_cast<std::int64_t>(args.kv_heads) * plan.row_chunks);
  require(!plan.combines() || (workspace.partial_o != nullptr && workspace.partial_lse != nullptr),
          "{}: {} splits need a workspace of partial O and LSE (decode_split_workspace_floats)", rung,
          plan.splits);
}

// One query row's merge of its sequence's first `used_splits` splits, by one warp (lane `lane`):
//     LSE = log sum_s exp(LSE_s),  O = sum_s exp(LSE_s - LSE) O_s,
// added in split order (the same bits whichever CTA runs it). A split that holds keys but none
// this row sees has LSE_s = -inf and weighs 0; no split with a visible key (an empty sequence, a
// token that sees nothing) leaves O = 0 and LSE = -inf. A NaN LSE_s makes the row NaN.
// kFromL2: the partials are read with ld.global.cg (__ldcg) — for a merge in the launch that
// wrote them (rung 04's last split), where only the L2 is sure to hold other SMs' stores.
template <typename T, int kHeadDim, bool kFromL2 = false>
__device__ __forceinline__ void merge_split_row(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                                const DecodeSplitWorkspace& workspace, std::int64_t row,
                                                int used_splits, int lane) {
  constexpr int kColumnsPerLane = kHeadDim / core::kWarpSize;
  static_assert(kColumnsPerLane == 2 || kColumnsPerLane == 4, "D = 64 or 128: a float2 or float4 a lane");
  const float* lse = workspace.partial_lse + row * plan.splits;
  const float* partial = workspace.partial_o + row * plan.splits * kHeadDim + lane * kColumnsPerLane;
  const auto load_lse = [&](int s) { return kFromL2 ? __ldcg(lse + s) : lse[s]; };

  float max = -CUDART_INF_F;
  for (int s = lane; s < used_splits; s += core::kWarpSize) max = core::max_propagate_nan(max, load_lse(s));
  max = core::warp_reduce_max(max);

  float o[kColumnsPerLane] = {};
  float out_lse = -CUDART_INF_F;
  if (max != -CUDART_INF_F) {
    float total = 0.f;
    for (int s = 0; s < used_splits; ++s) {
      const float weight = exp2_flush_to_zero((load_lse(s) - max) * kLog2e);
      total += weight;
      float values[kColumnsPerLane];
      if constexpr (kFromL2 && kColumnsPerLane == 4) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(partial + s * kHeadDim));
        values[0] = v.x, values[1] = v.y, values[2] = v.z, values[3] = v.w;
      } else if constexpr (kFromL2) {
        const float2 v = __ldcg(reinterpret_cast<const float2*>(partial + s * kHeadDim));
        values[0] = v.x, values[1] = v.y;
      } else {
        core::load_floats<float, kColumnsPerLane>(partial + s * kHeadDim, values);
      }
#pragma unroll
      for (int c = 0; c < kColumnsPerLane; ++c) o[c] = fmaf(weight, values[c], o[c]);
    }
    const float inverse = 1.f / total;
#pragma unroll
    for (int c = 0; c < kColumnsPerLane; ++c) o[c] *= inverse;
    out_lse = max + logf(total);
  }
  core::store_floats<T, kColumnsPerLane>(args.o + row * kHeadDim + lane * kColumnsPerLane, o);
  if (lane == 0) args.lse[row] = out_lse;
}

// The splits of sequence `b` that start inside it (the others wrote nothing): min(splits,
// ceil(L / keys_per_split)), 0 for an empty sequence.
__device__ __forceinline__ int decode_used_splits(const DecodeSplitPlan& plan, int length) {
  return min(plan.splits, ceil_div(length, plan.keys_per_split));
}

// Unnamed: each rung's file compiles its own combine kernel, with no symbol shared between them.
namespace {

inline constexpr int kDecodeCombineWarps = 4;

// The combine of a flash-decoding rung (rungs 02 and 03): one warp per query row merges the splits
// its sequence reaches (merge_split_row). SASS: MUFU.EX2 (the weights), MUFU.RCP (1 / their sum),
// SHFL.BFLY (the largest LSE_s), no LDL/STL.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kDecodeCombineWarps * core::kWarpSize)
    decode_combine_kernel(DecodeArgs<T> args, DecodeSplitPlan plan, DecodeSplitWorkspace workspace) {
  core::let_dependent_grids_start();
  core::wait_for_previous_grids();
  const int warp = static_cast<int>(threadIdx.x) / core::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % core::kWarpSize;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kDecodeCombineWarps + warp;
  if (row >= static_cast<std::int64_t>(args.batch) * args.q_heads * args.q_len) return;
  const int b = static_cast<int>(row / (static_cast<std::int64_t>(args.q_heads) * args.q_len));
  merge_split_row<T, kHeadDim>(args, plan, workspace, row, decode_used_splits(plan, args.seq_lens[b]), lane);
}

// Launches the combine of `plan`'s splits (nothing for one split: the split kernel wrote O and LSE).
template <typename T, int kHeadDim>
void launch_decode_combine(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                           const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  if (!plan.combines()) return;
  const std::int64_t all_rows = static_cast<std::int64_t>(args.batch) * args.q_heads * args.q_len;
  const auto blocks = static_cast<unsigned>((all_rows + kDecodeCombineWarps - 1) / kDecodeCombineWarps);
  core::launch_dependent(decode_combine_kernel<T, kHeadDim>, dim3(blocks),
                         dim3(kDecodeCombineWarps * core::kWarpSize), 0, stream, args, plan, workspace);
}

}  // namespace

}  // namespace kc::stage3
