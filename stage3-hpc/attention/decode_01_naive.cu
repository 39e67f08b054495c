// Decode rung 01 — one warp per query row walks its sequence's pages: online softmax in FP32 on
// CUDA cores, 16-byte loads of K and V rows. The starting point of the paged decode ladder.
//
// Idea: decoding is attention with a handful of query rows (one new token per sequence, or up to
// 8 being verified) against a long cached context, so it is a stream over the K/V cache: every
// cached byte is read, each used for a few multiply-adds. A warp owns one query row (sequence b,
// query head h, new token t; four rows to a CTA, consecutive in [B, Hq, Sq] order) and walks the
// block table of sequence b page by page: one table slot read per page (the same id for all 32
// lanes), then the page's rows of kv head h / (Hq / Hkv). The lanes form teams of D / 8, each lane
// holding 8 elements of the row of Q (FP32, pre-multiplied by scale . log2 e) and loading the same
// 8 elements of K and V (one 16-byte LDG each); a team takes one key at a time, so the warp works
// on 256 / D keys at once (2 for D = 128, 4 for D = 64). A team sums its lanes' partial dot
// products with XOR shuffles inside the team and updates its own running maximum, sum and 8
// columns of O (the online softmax, one key at a time). When the pages are done the teams' states
// are merged with shuffles across teams — the same merge rung 02 performs across CTAs:
//   m = max(m_a, m_b),  l = l_a 2^(m_a - m) + l_b 2^(m_b - m),  O = O_a 2^(m_a - m) + O_b 2^(m_b - m).
// Only keys the row sees are loaded (j < L - (Sq - 1 - t)): the NaN rows past a sequence's length
// and the kNoBlock slots past its last block are never touched, and an empty sequence, or a new
// token that sees no key, loads nothing and writes O = 0, LSE = -inf.
//
// What changed: nothing yet — the starting point. Every query head reads its kv head's pages by
// itself: a group of Hq / Hkv query heads (and Sq new tokens) reads the same K/V bytes Hq / Hkv x
// Sq times (L2 catches some of it); and a batch of one sequence runs Hq x Sq warps, a few dozen
// on a GPU of a hundred-odd SMs, however long the context.
//
// Expected limiter: latency and parallelism. Each warp has one 16-byte K and V load per lane in
// flight per step, and the next step's loads wait for this step's shuffles and exponentials
// (analysis: about 2 x 512 bytes in flight per warp); small batches leave most SMs idle. Rung 02
// splits the context over CTAs, reads each page once per group and keeps whole tiles in flight.
//
// SASS to look for: LDG.E.128 (Q, K and V rows; .CONSTANT where the compiler proves them
// read-only), STG.E.128 (O), SHFL.BFLY (the team sums and the merge), MUFU.EX2, FFMA; no HMMA, no
// LDGSTS, no shared memory, no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged/01_naive'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits>

#include "kc/stage3/decode_args.hpp"
#include "attention/decode_common.cuh"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * core::kWarpSize;

// The running softmax state of one team (one key at a time) or, after the merge, of the row.
struct TeamState {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.f;
  float o[kDecodeChunkElements] = {};
};

// Adds the state of the team `lane_offset` lanes away to this one (both are rescaled to the
// larger maximum; a team that saw no key has max = -inf and adds nothing).
__device__ __forceinline__ void merge_with_lane(TeamState& state, int lane_offset) {
  const float other_max = __shfl_xor_sync(core::kFullWarpMask, state.max, lane_offset);
  const float other_sum = __shfl_xor_sync(core::kFullWarpMask, state.sum, lane_offset);
  const float new_max = core::max_propagate_nan(state.max, other_max);
  const float base = exponent_base(new_max);
  const float mine = exp2_flush_to_zero(state.max - base);
  const float theirs = exp2_flush_to_zero(other_max - base);
  state.sum = state.sum * mine + other_sum * theirs;
#pragma unroll
  for (int c = 0; c < kDecodeChunkElements; ++c) {
    const float other_o = __shfl_xor_sync(core::kFullWarpMask, state.o[c], lane_offset);
    state.o[c] = state.o[c] * mine + other_o * theirs;
  }
  state.max = new_max;
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) decode_naive_kernel(DecodeArgs<T> args) {
  constexpr int kLanesPerKey = kHeadDim / kDecodeChunkElements;  // a team: 16 lanes (D 128) or 8
  constexpr int kKeysPerStep = core::kWarpSize / kLanesPerKey;    // teams in a warp: 2 or 4
  const int warp = static_cast<int>(threadIdx.x) / core::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % core::kWarpSize;
  const int team = lane / kLanesPerKey;
  const int part = lane % kLanesPerKey;  // which 8 columns of the row this lane holds

  // The query row: [B, Hq, Sq] order, one warp each. A warp past the last row runs on with no key
  // to visit and writes nothing (leaving early would make the compiler treat every shuffle below
  // as possibly divergent).
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + warp;
  const bool has_row = row < static_cast<std::int64_t>(args.batch) * args.q_heads * args.q_len;
  const std::int64_t safe_row = has_row ? row : 0;
  const int token = static_cast<int>(safe_row % args.q_len);
  const std::int64_t head_row = safe_row / args.q_len;  // b * Hq + h
  const int head = static_cast<int>(head_row % args.q_heads);
  const int b = static_cast<int>(head_row / args.q_heads);
  const int kv_head = head / (args.q_heads / args.kv_heads);
  const int visible = has_row ? decode_visible_keys(args.seq_lens[b], args.q_len, token) : 0;
  const std::int32_t* table_row = args.block_table + static_cast<std::int64_t>(b) * args.max_blocks;

  float q[kDecodeChunkElements];
  core::load_floats<T, kDecodeChunkElements>(args.q + safe_row * kHeadDim + part * kDecodeChunkElements, q);
  const float q_scale = args.scale * kLog2e;
#pragma unroll
  for (int c = 0; c < kDecodeChunkElements; ++c) q[c] *= q_scale;

  TeamState state;
  for (int page_key0 = 0; page_key0 < visible; page_key0 += args.block_size) {
    const std::int32_t block = table_row[page_key0 / args.block_size];
    const int page_keys = min(args.block_size, visible - page_key0);
    // Every lane runs every step (the shuffles need the whole warp); a team whose key is past
    // the page's visible rows loads nothing and keeps its state.
    for (int step = 0; step < page_keys; step += kKeysPerStep) {
      const int key = step + team;  // row of the page
      const bool valid = key < page_keys;
      float k[kDecodeChunkElements] = {}, v[kDecodeChunkElements] = {};
      if (valid) {
        const int column = part * kDecodeChunkElements;
        core::load_floats<T, kDecodeChunkElements>(page_row(args.k_cache, block, kv_head, key, args) + column, k);
        core::load_floats<T, kDecodeChunkElements>(page_row(args.v_cache, block, kv_head, key, args) + column, v);
      }
      float score = 0.f;
#pragma unroll
      for (int c = 0; c < kDecodeChunkElements; ++c) score = fmaf(q[c], k[c], score);
#pragma unroll
      for (int offset = 1; offset < kLanesPerKey; offset *= 2)
        score += __shfl_xor_sync(core::kFullWarpMask, score, offset);
      if (valid) {
        const float new_max = core::max_propagate_nan(state.max, score);
        const float rescale = exp2_flush_to_zero(state.max - new_max);  // 0 on the first key
        const float probability = exp2_flush_to_zero(score - new_max);
        state.sum = state.sum * rescale + probability;
#pragma unroll
        for (int c = 0; c < kDecodeChunkElements; ++c) state.o[c] = fmaf(probability, v[c], state.o[c] * rescale);
        state.max = new_max;
      }
    }
  }

  // The teams' states into one (lanes that hold the same columns are kLanesPerKey apart).
#pragma unroll
  for (int offset = kLanesPerKey; offset < core::kWarpSize; offset *= 2) merge_with_lane(state, offset);

  if (!has_row) return;
  const RowResult result = finish_row(state.max, state.sum, visible);
  // One 16-byte store of 8 columns a lane. __stwb is a plain store (write-back, the default cache
  // policy) that stays one st.global.v4: the same store as a uint4 assignment came out of the
  // front end as four 4-byte stores in this kernel.
  if (team == 0) {
    const float* o = state.o;
    const float scale = result.o_scale;
    const uint4 chunk = make_uint4(pack_pair<T>(o[0] * scale, o[1] * scale), pack_pair<T>(o[2] * scale, o[3] * scale),
                                   pack_pair<T>(o[4] * scale, o[5] * scale), pack_pair<T>(o[6] * scale, o[7] * scale));
    __stwb(reinterpret_cast<uint4*>(args.o + row * kHeadDim + part * kDecodeChunkElements), chunk);
  }
  if (lane == 0) args.lse[row] = result.lse;
}

template <typename T, int kHeadDim>
void launch(const DecodeArgs<T>& args, cudaStream_t stream) {
  const std::int64_t rows = static_cast<std::int64_t>(args.batch) * args.q_heads * args.q_len;
  const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  decode_naive_kernel<T, kHeadDim><<<blocks, kThreads, 0, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <typename T>
void attention_decode_01_naive(const DecodeArgs<T>& args, cudaStream_t stream) {
  require_decode_args(args, "decode rung 01");
  require(static_cast<std::int64_t>(args.batch) * args.q_heads * args.q_len <= std::int64_t{kWarps} * INT32_MAX,
          "decode rung 01: B x Hq x Sq = {} x {} x {} query rows exceed the grid (one warp each)", args.batch,
          args.q_heads, args.q_len);
  if (args.head_dim == 64)
    launch<T, 64>(args, stream);
  else
    launch<T, 128>(args, stream);
}

template void attention_decode_01_naive<__nv_bfloat16>(const DecodeArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_decode_01_naive<__half>(const DecodeArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
