// kc/stage3/decode_args.hpp — the paged decode ladder's arguments, rung 02's split plan and one
// launch per rung. An argument header: the rung files include it and nothing of the harness
// (kc/stage3/attention_decode.hpp defines the op, src/register_attention_decode.cpp files the
// rungs with the registry, kc/stage3/attention_ops.hpp is the entry other stages call).
//
// What every rung computes is attention_decode.hpp's definition: for sequence b, query head h and
// new token t, O = softmax(scale . Q K^T) V over the keys j < L - (Sq - 1 - t) of the sequence's
// L = seq_lens[b] (kv head h / (Hq / Hkv)), key j being row j mod block_size of the block
// block_table[b][j / block_size]; LSE = the natural log-sum-exp of the scaled scores; a row that
// sees no key gets O = 0 and LSE = -inf. Rows of a last block at and past L, and table slots at and
// past ceil(L / block_size), are never read.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kc/common/error.hpp"

namespace kc::stage3 {

// T: __nv_bfloat16 or __half. Every tensor is contiguous:
//   q, o         [batch, q_heads, q_len, head_dim]
//   k_cache,
//   v_cache      [num_blocks, kv_heads, block_size, head_dim]
//   block_table  [batch, max_blocks] int32 block ids
//   seq_lens     [batch] int32 key counts (the new tokens included)
//   lse          [batch, q_heads, q_len] f32
template <typename T>
struct DecodeArgs {
  const T* q = nullptr;
  const T* k_cache = nullptr;
  const T* v_cache = nullptr;
  const std::int32_t* block_table = nullptr;
  const std::int32_t* seq_lens = nullptr;
  T* o = nullptr;
  float* lse = nullptr;
  int batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, head_dim = 0;
  int block_size = 0;  // tokens a block: 16, 32 or 64
  int max_blocks = 0;  // table slots per sequence (the row length of block_table)
  float scale = 0.f;   // the softmax scale itself (the harness resolves "0 means 1/sqrt(D)")

  // The query rows that share one kv head: its Hq / Hkv query heads times the Sq new tokens,
  // consecutive rows of Q and O.
  __host__ __device__ int group_rows() const { return q_heads / kv_heads * q_len; }
  // The most keys a sequence's table row addresses.
  __host__ __device__ int max_keys() const { return max_blocks * block_size; }
};

// The checks of a decode call that read its shape only, no tensor — what a split plan, a workspace
// size and an occupancy query depend on: D compiled, the block size, every count >= 1, Hq a multiple
// of Hkv, key indices within 32 bits. kc::Error naming `who`. require_decode_args
// (attention/decode_common.cuh) adds the tensors' checks before a launch.
template <typename T>
void require_decode_shape(const DecodeArgs<T>& args, const char* who) {
  require(args.head_dim == 64 || args.head_dim == 128,
          "{}: head dimension D = {} is not compiled; the decode rungs support D = 64 and D = 128", who,
          args.head_dim);
  require(args.block_size == 16 || args.block_size == 32 || args.block_size == 64,
          "{}: block_size = {} tokens; the cache's blocks hold 16, 32 or 64", who, args.block_size);
  require(args.batch >= 1 && args.q_heads >= 1 && args.kv_heads >= 1 && args.q_len >= 1 && args.max_blocks >= 1,
          "{}: B {}, Hq {}, Hkv {}, Sq {} and the table's slots per sequence {} must all be >= 1", who, args.batch,
          args.q_heads, args.kv_heads, args.q_len, args.max_blocks);
  require(args.q_heads % args.kv_heads == 0, "{}: Hq = {} is not a multiple of Hkv = {}", who, args.q_heads,
          args.kv_heads);
  require(args.max_blocks <= INT32_MAX / args.block_size, "{}: {} slots of {} keys exceed 32-bit key indices", who,
          args.max_blocks, args.block_size);
}

// Checks a decode launch before it happens, on the host and without any CUDA call (the rungs call
// it first, and so do PagedDecodeAttention::run and run_rope): kc::Error with a sentence a learner
// can act on. The block table and lengths live on the device and are not read here:
// validate_paged_kv (attention_decode.hpp) checks a host copy.
template <typename T>
void require_decode_args(const DecodeArgs<T>& args, const char* rung) {
  require_decode_shape(args, rung);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  require(aligned(args.q) && aligned(args.k_cache) && aligned(args.v_cache) && aligned(args.o),
          "{}: Q, K_cache, V_cache and O must start 16-byte aligned (rows are moved in 16-byte pieces)", rung);
  require(args.block_table != nullptr && args.seq_lens != nullptr && args.lse != nullptr,
          "{}: block_table, seq_lens and LSE must not be null", rung);
}

// The head dimensions the decode rungs are compiled for (a template parameter: the loops over D
// unroll and the accumulators stay in registers).
inline constexpr int kDecodeHeadDims[] = {64, 128};

// ---- Rung 02's split of the context (flash-decoding) -------------------------------------------

// A CTA of rung 02 holds at most this many query rows of a group (group size x Sq); a group with
// more is cut into chunks of this many rows, each chunk a CTA that reads the pages again.
inline constexpr int kDecodeMaxRowsPerCta = 32;
// A split is a whole number of rung 02's 32-key tiles and of pages (16, 32 or 64 keys): a
// multiple of 64 keys.
inline constexpr int kDecodeSplitKeyMultiple = 64;
// Below this many keys a split's fixed costs (Q into shared memory, its partial O and LSE written
// and read back by the combine) are no longer small against its K/V reads.
inline constexpr int kDecodeMinKeysPerSplit = 256;
// How many CTAs per SM the split aims for: enough that every SM holds several CTAs whose page
// loads are in flight at once (rung 02's CTAs are small: up to 4 warps, at most 50 KiB of shared
// memory).
inline constexpr int kDecodeCtasPerSmTarget = 4;

struct DecodeSplitPlan {
  int row_chunks = 1;                                // CTAs along the rows of one group
  int splits = 1;                                    // CTAs along the context of one sequence
  int keys_per_split = kDecodeSplitKeyMultiple;      // split s covers keys [s, s + 1) x this
  // One split: the CTAs write O and LSE themselves and no combine runs.
  constexpr bool combines() const { return splits > 1; }
};

constexpr int decode_ceil_div(int a, int b) { return (a + b - 1) / b; }

// The plan for exactly `splits` splits of `max_keys` (fewer when the rounding of a split up to a
// multiple of 64 keys leaves the last ones empty): how the tests force a split count.
constexpr DecodeSplitPlan decode_plan_with_splits(int group_rows, int max_keys, int splits) {
  DecodeSplitPlan plan;
  plan.row_chunks = decode_ceil_div(group_rows, kDecodeMaxRowsPerCta);
  const int keys = max_keys > 0 ? max_keys : 1;
  const int wanted = splits < 1 ? 1 : splits;
  plan.keys_per_split =
      decode_ceil_div(decode_ceil_div(keys, wanted), kDecodeSplitKeyMultiple) * kDecodeSplitKeyMultiple;
  plan.splits = decode_ceil_div(keys, plan.keys_per_split);
  return plan;
}

// The split rule. The grid has batch x kv_heads x row_chunks CTAs before any split; when that is
// fewer than kDecodeCtasPerSmTarget x sm_count, the context is cut into as many splits as make up
// the difference, but never into splits under kDecodeMinKeysPerSplit keys. The rule reads only
// the table's width (max_keys), never the lengths, which live on the device: a ragged batch gets
// the split count of its longest possible sequence, and a shorter sequence's CTAs past its length
// exit at once. Examples (132 SMs, target 528 CTAs, 8 kv heads, 4 query heads a group, Sq = 1):
// batch 1 at 32k keys: 8 CTAs -> 66 splits wanted, 512 keys each -> 64 splits, 512 CTAs; batch 1
// at 1k: at most 1024 / 256 = 4 splits; batch 64 at any length: 512 CTAs -> 2 splits where the
// context has 512 keys or more; batch 256: 2048 CTAs, one split. `min_keys_per_split` (a multiple
// of kDecodeSplitKeyMultiple, kDecodeMinKeysPerSplit unless a caller chooses otherwise:
// PagedDecodeAttention::set_min_keys_per_split) is the floor; smaller values give a short context
// more splits (more CTAs in parallel, each walking fewer tiles) for more combine work.
constexpr DecodeSplitPlan plan_decode_splits(int batch, int kv_heads, int group_rows, int max_keys, int sm_count,
                                             int min_keys_per_split = kDecodeMinKeysPerSplit) {
  const int row_chunks = decode_ceil_div(group_rows, kDecodeMaxRowsPerCta);
  const long long ctas = static_cast<long long>(batch) * kv_heads * row_chunks;
  const long long target = static_cast<long long>(kDecodeCtasPerSmTarget) * (sm_count > 0 ? sm_count : 1);
  long long splits = ctas >= target ? 1 : (target + ctas - 1) / ctas;
  const int floor = min_keys_per_split > 0 ? min_keys_per_split : kDecodeMinKeysPerSplit;
  const int most = max_keys / floor;  // splits of at least the minimum length
  if (splits > most) splits = most;
  return decode_plan_with_splits(group_rows, max_keys, splits < 1 ? 1 : static_cast<int>(splits));
}

// Rung 03's split rule: the same plans (whole 64-key tiles, the same row chunks, workspace and
// combine), but the split count is chosen against the CTAs the GPU holds at once,
// `resident_ctas` (CTAs an SM holds for rung 03's shared memory, attention_decode_03_ctas_per_sm,
// times the SM count), instead of a fixed number per SM. Rung 03's CTAs are large (up to 104 KiB
// of shared memory: two or three an SM), so the waves are few and a last wave that is mostly
// empty costs a large share of the time: of the split counts from the one that just fills one
// wave (resident_ctas / CTAs before any split, at least 1) up to twice that, it takes the first
// whose CTAs fill their waves to kDecodeWaveFill (or the fullest), never splits under
// `min_keys_per_split` keys (a short context starts from the most splits of that length).
// Examples (132 SMs x 2 = 264 slots, 8 kv heads, 4 rows a group): batch 1 at 32k keys: 33 splits
// wanted, 1024 keys each -> 32 splits, 256 CTAs, one wave; batch 8: 4 splits (256 CTAs); batch
// 48: 384 CTAs fill 2 waves to 73%, 2 splits fill 3 to 97%; batch 64 (512 CTAs, 97% of 2 waves)
// and 256: one split. Like plan_decode_splits it reads the table's width only.
inline constexpr double kDecodeWaveFill = 0.9;
constexpr DecodeSplitPlan plan_decode_splits_in_waves(int batch, int kv_heads, int group_rows, int max_keys,
                                                      int resident_ctas,
                                                      int min_keys_per_split = kDecodeMinKeysPerSplit) {
  const int row_chunks = decode_ceil_div(group_rows, kDecodeMaxRowsPerCta);
  const long long ctas = static_cast<long long>(batch) * kv_heads * row_chunks;
  const long long slots = resident_ctas > 0 ? resident_ctas : 1;
  const int floor = min_keys_per_split > 0 ? min_keys_per_split : kDecodeMinKeysPerSplit;
  const long long most = max_keys / floor > 1 ? max_keys / floor : 1;  // splits of at least the floor
  const long long one_wave = ctas >= slots ? 1 : slots / ctas;
  const long long first = one_wave < most ? one_wave : most;
  DecodeSplitPlan best = decode_plan_with_splits(group_rows, max_keys, 1);
  double best_fill = -1.0;
  for (long long wanted = first; wanted <= 2 * first && wanted <= most; ++wanted) {
    const DecodeSplitPlan plan = decode_plan_with_splits(group_rows, max_keys, static_cast<int>(wanted));
    const long long all = ctas * plan.splits;
    const double fill = static_cast<double>(all) / static_cast<double>((all + slots - 1) / slots * slots);
    if (fill > best_fill) {
      best = plan;
      best_fill = fill;
    }
    if (fill >= kDecodeWaveFill) break;
  }
  return best;
}

// Rung 02's scratch (FP32): the partial O of every (query row, split), [B, Hq, Sq, splits, D],
// and its LSE, [B, Hq, Sq, splits]. Unused (null) when the plan has one split. Rungs 04 and 05 add
// one arrival counter per (sequence, kv head, row chunk), [B, Hkv x row_chunks]: zero before their
// first launch, and set back to zero by each launch (decode_split_arrival_counters of them).
struct DecodeSplitWorkspace {
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  unsigned* arrivals = nullptr;
};

// The floats of that scratch: 0 for one split.
constexpr std::size_t decode_split_workspace_floats(int batch, int q_heads, int q_len, int head_dim,
                                                    const DecodeSplitPlan& plan) {
  if (!plan.combines()) return 0;
  const std::size_t rows = static_cast<std::size_t>(batch) * q_heads * q_len;
  return rows * static_cast<std::size_t>(plan.splits) * (static_cast<std::size_t>(head_dim) + 1);
}

// Rungs 04 and 05's arrival counters: one per CTA of a split's grid column (B x Hkv x row
// chunks), none for one split.
constexpr std::size_t decode_split_arrival_counters(int batch, int kv_heads, const DecodeSplitPlan& plan) {
  if (!plan.combines()) return 0;
  return static_cast<std::size_t>(batch) * static_cast<std::size_t>(kv_heads) *
         static_cast<std::size_t>(plan.row_chunks);
}

// The workspace laid out in `floats` (decode_split_workspace_floats of the same plan).
inline DecodeSplitWorkspace decode_split_workspace(float* floats, int batch, int q_heads, int q_len, int head_dim,
                                                   const DecodeSplitPlan& plan) {
  DecodeSplitWorkspace workspace;
  if (!plan.combines()) return workspace;
  const std::size_t rows = static_cast<std::size_t>(batch) * q_heads * q_len;
  workspace.partial_o = floats;
  workspace.partial_lse = floats + rows * static_cast<std::size_t>(plan.splits) * static_cast<std::size_t>(head_dim);
  return workspace;
}

// ---- The rungs ---------------------------------------------------------------------------------

// Rung 01: one warp per query row (four to a CTA) walks its sequence's pages, online softmax in
// FP32 on CUDA cores, 16-byte loads of K and V rows.
template <typename T>
void attention_decode_01_naive(const DecodeArgs<T>& args, cudaStream_t stream);

// Rung 02: flash-decoding. One CTA per (split of the context, kv head [, row chunk], sequence)
// holds the group's query rows; pages travel by cp.async into shared memory once per group; each
// split writes an FP32 partial O and LSE to `workspace`, then a combine kernel merges them.
// `workspace` must hold decode_split_workspace_floats(..., plan) floats (none for one split).
template <typename T>
void attention_decode_02_split_kv(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                  const DecodeSplitWorkspace& workspace, cudaStream_t stream);

// Rung 03: rung 02's grid, plans, workspace and combine, with the group's rows padded to m16
// tiles: S = Q K^T and O += P V on mma.sync (ldmatrix of K, ldmatrix.trans of V), 64-key tiles of
// pages gathered by a 3- or 4-stage cp.async pipeline, the tile's keys split over 4 warps.
template <typename T>
void attention_decode_03_mma_split_kv(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                      const DecodeSplitWorkspace& workspace, cudaStream_t stream);

// The CTAs of rung 03 one SM of the current GPU holds at once for `args` (its shared memory and
// registers decide), the `resident_ctas` per SM of plan_decode_splits_in_waves. Reads the head
// dimension and the group's rows (a shape without tensors will do); checks require_decode_shape.
template <typename T>
int attention_decode_03_ctas_per_sm(const DecodeArgs<T>& args);

// Rung 04: rung 03 in one launch. Each split writes its partial, counts itself in its group's
// arrival counter (workspace.arrivals, zeroed once by the caller), and the split that arrives
// last merges the group's partials (rung 03's combine, read from L2) and resets the counter; a
// sequence that fits in one split (L <= keys_per_split) is written directly, with no partial.
// The plans and partials are rung 03's; the workspace adds decode_split_arrival_counters.
template <typename T>
void attention_decode_04_fused_combine(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                       const DecodeSplitWorkspace& workspace, cudaStream_t stream);
template <typename T>
int attention_decode_04_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 05: rung 04 with the split's length, block table and first pages of older keys asked for
// (an L2 prefetch) before it waits for the kernel ahead in a programmatic-launch chain. Its
// contract adds: block_table, seq_lens and the cached rows before each sequence's new tokens are
// not written by the kernel it launches behind (they are the caller's, set before the chain).
template <typename T>
void attention_decode_05_early_pages(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                     const DecodeSplitWorkspace& workspace, cudaStream_t stream);
template <typename T>
int attention_decode_05_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 06's inputs beyond DecodeArgs: the new tokens' keys and values as a projection wrote them
// (before RoPE), the rotation table, and the caches as writable pointers. Rung 06 computes, for
// new token t of sequence b (position p = L - Sq + t, L = seq_lens[b]): Q's rows of the token
// rotated by p (rotate_half: element i pairs with i + D/2, angle cos_sin[p][i] / cos_sin[p][D/2 + i],
// stage 2's RoPE and table), the token's K rotated by p; it writes the rotated K and V_new into the
// cache rows of position p (block block_table[b][p / block_size], row p mod block_size) and returns
// attention_decode_paged's O and LSE with the rotated Q and the written rows. Q itself is not
// changed. Layouts (contiguous):
//   k_new, v_new  [batch, q_len, kv_heads, head_dim]  (token-major: the engine's K and V projections)
//   cos_sin       [positions, head_dim] f32; every sequence's L must be at most `positions`
//                 (the device does not check it: a caller's table covers its max_model_len)
//   k_cache,
//   v_cache       DecodeArgs' pools, the same addresses, written at the new tokens' rows
template <typename T>
struct DecodeRopeArgs {
  const T* k_new = nullptr;
  const T* v_new = nullptr;
  const float* cos_sin = nullptr;
  int positions = 0;
  T* k_cache = nullptr;
  T* v_cache = nullptr;
  // Decode rung 11 only (rungs 06-10 ignore them): where the kernel ahead — the layer's q|k|v
  // projection, launched with Gemm::ColumnCounts (kc/stage3/gemm.hpp) — counts the columns it has
  // written for each kv head: heads_written[h] reaches heads_written_target once kv head h's
  // query heads' rows of Q and its rows of k_new and v_new are all stored (in the engine the target
  // is (q_heads / kv_heads + 2) x head_dim). Rung 11's CTAs acquire their kv head's count instead of
  // waiting for the whole kernel ahead. Null: rung 11 waits for the kernel ahead as rung 10 does.
  const unsigned* heads_written = nullptr;  // [kv_heads]
  unsigned heads_written_target = 0;
};

// The checks of the rope rungs' (06-08) arguments, beside require_decode_args'.
template <typename T>
void require_rope_args(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope, const char* rung) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  require(rope.k_new != nullptr && rope.v_new != nullptr && rope.cos_sin != nullptr,
          "{}: k_new, v_new and cos_sin must not be null", rung);
  require(aligned(rope.k_new) && aligned(rope.v_new) && aligned(rope.cos_sin),
          "{}: k_new, v_new and cos_sin must start 16-byte aligned (rows are moved in 16-byte pieces)", rung);
  require(rope.positions >= 1, "{}: the cos/sin table has {} positions; it needs one per position up to the "
          "longest sequence", rung, rope.positions);
  require(rope.k_cache == args.k_cache && rope.v_cache == args.v_cache,
          "{}: the rope arguments' caches ({}, {}) are not the decode arguments' ({}, {}): pass the same pools "
          "(the new rows are written where the attention reads them)",
          rung, static_cast<const void*>(rope.k_cache), static_cast<const void*>(rope.v_cache),
          static_cast<const void*>(args.k_cache), static_cast<const void*>(args.v_cache));
}

// Rung 06: rung 05 with the new tokens' RoPE and cache write inside (DecodeRopeArgs above): in a
// decode step it replaces the separate kernel that rotates q and k and writes the new K/V rows.
// Rung 05's plans, workspace and contract (block_table, seq_lens and the cached rows before the
// new tokens are not written by the kernel ahead; here k_new, v_new and Q are, and are read after
// the wait).
template <typename T>
void attention_decode_06_rope_in(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope, const DecodeSplitPlan& plan,
                                 const DecodeSplitWorkspace& workspace, cudaStream_t stream);
template <typename T>
int attention_decode_06_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 06 with a flaw, for its negative control: the new tokens' Q and K rotated by the angle of
// the position before theirs (after it, at position 0).
template <typename T>
void attention_decode_06_position_off_by_one(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                             const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                             cudaStream_t stream);

// Rung 07: rung 06 with every stage of its ring filled with cached rows before the wait for the
// kernel ahead (cp.async, not a prefetch): after the wait only Q and the new tokens' rows are
// read. Rung 06's plans, workspace, arguments and contract — the contract now covers data copied
// before the wait: block_table, seq_lens and every cached row before the new tokens are written
// before the chain of kernels this one is part of starts (an engine's earlier steps), never by a
// kernel of the chain.
template <typename T>
void attention_decode_07_pages_before_wait(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                           const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                           cudaStream_t stream);
template <typename T>
int attention_decode_07_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 07 with a flaw, for its negative control: the new tokens' rows of the first tiles copied
// from their pages before the wait, like the cached rows — rows the kernel itself has not written
// yet (the test poisons them) — and never built from k_new / v_new.
template <typename T>
void attention_decode_07_new_rows_from_cache(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                             const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                             cudaStream_t stream);

// Rung 08: rung 07 with each thread's page addresses worked out once a CTA (its first row, the
// block's bytes, a row offset per copy) instead of from the key for every row. Rung 07's plans,
// workspace, arguments and contract.
template <typename T>
void attention_decode_08_page_walk(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                   const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                   cudaStream_t stream);
template <typename T>
int attention_decode_08_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 08 with a flaw, for its negative control: every row of a tile read from the block of the
// tile's first key — a page read from the wrong block wherever a 64-key tile spans several blocks
// (blocks of 16 or 32 keys); right with blocks of 64.
template <typename T>
void attention_decode_08_one_page_per_tile(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                           const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                           cudaStream_t stream);

// Rung 09: rung 08 in a grid of groups x splits (the CTAs of the first splits, those that hold
// keys at short contexts, started first) whose CTAs past their sequence's keys leave before the
// wait for the kernel ahead. Rung 08's plans, workspace, arguments and contract.
template <typename T>
void attention_decode_09_workers_first(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                       const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                       cudaStream_t stream);
template <typename T>
int attention_decode_09_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 09 with a flaw, for its negative control: each split's partial O and LSE stored in the slot
// of its group's index (modulo the splits) — the split's index in rung 08's grid order — so the merge
// adds the wrong partials wherever a sequence's keys span several splits; right where one split
// holds each sequence (no partials).
template <typename T>
void attention_decode_09_partials_in_rung08_slots(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                               const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                               cudaStream_t stream);

// Rung 10: rung 08 with the splits' hand-over to the merge in the launch ordered by one
// release/acquire count a CTA (thread 0's, after a barrier) instead of every thread's fences.
// Rung 08's plans, workspace, arguments, contract and bits.
template <typename T>
void attention_decode_10_release_acquire_merge(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                               const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                               cudaStream_t stream);
template <typename T>
int attention_decode_10_ctas_per_sm(const DecodeArgs<T>& args);

// Rung 11: rung 10 that, given rope.heads_written, starts on a kv head's rows once the q|k|v
// projection ahead of it has counted them written (thread 0 acquires the head's count) instead of
// waiting for that whole kernel, and whose CTAs past their sequence's keys leave without waiting.
// Without counters it is rung 10. Rung 10's plans, workspace, contract and bits; the counters are
// the caller's and are only read.
template <typename T>
void attention_decode_11_heads_handed_over(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                           const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                           cudaStream_t stream);
template <typename T>
int attention_decode_11_ctas_per_sm(const DecodeArgs<T>& args);
// Rung 11 with a flaw, for its negative control: every CTA acquires kv head 0's count, whatever
// its own head — rows of the other heads read before they are written, wherever the projection
// finishes head 0 first.
template <typename T>
void attention_decode_11_waits_for_head_zero(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                             const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                             cudaStream_t stream);

// Rung 04 with a flaw, for its negative control (tests/negative_controls): the sequence's last
// used split is left out of the merge. Right where a sequence uses one split, wrong wherever it uses more.
template <typename T>
void attention_decode_04_drops_last_split(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                          const DecodeSplitWorkspace& workspace, cudaStream_t stream);

}  // namespace kc::stage3
