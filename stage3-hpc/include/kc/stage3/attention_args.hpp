// kc/stage3/attention_args.hpp — the FlashAttention ladder's arguments and one launch per rung.
// An argument header: the rung files include it and nothing of the harness
// (kc/stage3/attention.hpp defines the op, src/register_attention.cpp files the rungs with the
// registry, kc/stage3/attention_ops.hpp is the entry other stages call).
//
// What every rung computes is attention.hpp's definition: per batch b, query head h and query row
// i, O = softmax(scale . Q K^T) V over the visible keys (kv head h / (Hq / Hkv); with `causal`,
// keys j <= i + Sk - Sq, the mask aligned bottom-right), LSE = the natural log-sum-exp of the
// scaled scores; a row with no visible key gets O = 0 and LSE = -inf.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/error.hpp"

namespace kc::stage3 {

class HopperLaunchCache;  // arch/sm90/tma_descriptor.hpp: the Hopper rungs' tensor maps

// T: __nv_bfloat16 or __half. Q and O are [B, Hq, Sq, D], K and V [B, Hkv, Sk, D], each with the
// element strides below and the last dimension contiguous; LSE is a contiguous [B, Hq, Sq] of f32.
// AttentionParams are what a fused kernel reads about its problem; callers fill AttentionArgs
// (below), which adds the packed form's offsets. The dense kernels take AttentionParams as their
// parameter (AttentionArgs sliced at the launch), so that their code is what it was before the
// offsets existed: a larger parameter struct alone changes what ptxas makes of a kernel.
template <typename T>
struct AttentionParams {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  T* o = nullptr;
  float* lse = nullptr;
  int batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  std::int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;  // Q and O
  std::int64_t kv_batch_stride = 0, kv_head_stride = 0, kv_row_stride = 0;  // K and V
  float scale = 0.f;    // the softmax scale itself (the harness resolves "0 means 1/sqrt(D)")
  bool causal = false;
};

// The arguments of an attention launch: the dense form above with cu_seqlens_q and cu_seqlens_k
// null. With both set, the packed variable-length form (FlashAttention's "varlen" API, what
// continuous batching hands attention: the tokens of sequences of different lengths one after the
// other, no padding; attention.hpp has its layout next to the dense one,
// kc/stage3/attention_varlen.hpp the op):
//   cu_seqlens_q, cu_seqlens_k  device arrays of B + 1 int32 cumulative offsets, [0] = 0,
//                 non-decreasing: sequence b's queries are the rows cu_seqlens_q[b] ..
//                 cu_seqlens_q[b + 1] - 1 of Q and O (Sq_b of them), its keys the rows
//                 cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of K and V (Sk_b). A length may be 0.
//   Q, O          [total_q, Hq, D]: packed row t (a token) at t . q_row_stride, its head h at
//                 h . q_head_stride further (contiguous: q_row_stride = Hq . D, q_head_stride = D)
//   K, V          [total_k, Hkv, D]: kv_row_stride and kv_head_stride alike
//   LSE           sequence b's [Hq, Sq_b] block, contiguous, at element cu_seqlens_q[b] . Hq (f32):
//                 with every Sq_b equal to Sq this is the dense [B, Hq, Sq]
//   q_len, kv_len the longest Sq_b and Sk_b (FlashAttention's max_seqlen_q and max_seqlen_k), or
//                 any bound above them: they size the grid, and a sequence longer than its bound
//                 is not computed in full
//   q_batch_stride, kv_batch_stride  0: a sequence is found by its offsets, not by a stride
// The offsets live on the device (the host may not have them without a copy), so they alone are
// not checked before a launch: that they start at 0, never decrease and stay within the bounds
// and the tensors is the caller's promise. Rung 05 (attention_fwd_varlen_05_fa2_two_tiles_per_warp),
// rung 15's packed kernel (attention_fwd_varlen_15_lazy_rescale, sm_90a) and the public entry
// attention_forward run this form; the other rungs refuse it.
template <typename T>
struct AttentionArgs : AttentionParams<T> {
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
};

// Whether `args` is the packed variable-length form (either offset array set; a launch checks
// that both are).
template <typename T>
bool is_packed(const AttentionArgs<T>& args) {
  return args.cu_seqlens_q != nullptr || args.cu_seqlens_k != nullptr;
}

// The head dimensions the fused rungs (02-05) are compiled for: a template parameter, so that the
// loops over D unroll and O's accumulators stay in registers.
inline constexpr int kFlashHeadDims[] = {64, 128};

// The most query rows a CTA of any rung holds (rung 05's two 16-row tiles a warp, the Hopper rungs'
// two 64-row consumer warpgroups, rung 09's three at D = 64): the bound the public entry checks Sq
// against before it knows which rung runs. The rungs static_assert that their tiles stay within it.
inline constexpr int kFlashMaxBlockRows = 192;

// Checks an attention launch before it happens, on the host and without any CUDA call (the rungs
// call it first, and so does attention_forward before it asks which GPU it runs on): kc::Error
// with a sentence a learner can act on. `rows_per_block`: the rung's query rows a CTA.
// `packed`: the launch runs the packed variable-length form (attention_args.hpp), which needs both
// offset arrays and no batch strides; otherwise the offsets must be absent (a dense kernel would
// read the packed tensors as [B, H, S, D] and compute something else).
template <typename T>
void require_flash_args(const AttentionArgs<T>& args, const char* rung, int rows_per_block, bool packed = false) {
  if (packed) {
    require(args.cu_seqlens_q != nullptr && args.cu_seqlens_k != nullptr,
            "{}: the packed variable-length form needs both cu_seqlens_q and cu_seqlens_k (device arrays of "
            "B + 1 = {} int32 offsets); cu_seqlens_q is {}, cu_seqlens_k is {}",
            rung, args.batch + 1, args.cu_seqlens_q != nullptr ? "set" : "null",
            args.cu_seqlens_k != nullptr ? "set" : "null");
    require(args.q_batch_stride == 0 && args.kv_batch_stride == 0,
            "{}: in the packed variable-length form a sequence starts at its offset (cu_seqlens_q/k), not at "
            "a batch stride: set q_batch_stride and kv_batch_stride to 0 (got {} and {})",
            rung, args.q_batch_stride, args.kv_batch_stride);
  } else {
    require(!is_packed(args),
            "{}: cu_seqlens_q/cu_seqlens_k are set, the packed variable-length form, which this rung does not "
            "run (it reads the dense [B, H, S, D] form); attention_forward and "
            "attention_fwd_varlen_05_fa2_two_tiles_per_warp run it",
            rung);
  }
  require(args.head_dim == 64 || args.head_dim == 128,
          "{}: head dimension D = {} is not compiled; this rung supports D = 64 and D = 128", rung,
          args.head_dim);
  require(args.batch >= 1 && args.q_heads >= 1 && args.kv_heads >= 1 && args.q_len >= 1 && args.kv_len >= 1,
          "{}: every dimension must be >= 1 (B {}, Hq {}, Hkv {}, Sq {}, Sk {}{})", rung, args.batch,
          args.q_heads, args.kv_heads, args.q_len, args.kv_len,
          packed ? "; in the packed form Sq and Sk are the longest sequence's lengths, max_seqlen_q and "
                   "max_seqlen_k"
                 : "");
  require(args.q_heads % args.kv_heads == 0, "{}: Hq = {} is not a multiple of Hkv = {}", rung, args.q_heads,
          args.kv_heads);
  require(args.batch <= 65535 && args.q_heads <= 65535,
          "{}: the grid holds batches in z and heads in y: B = {} and Hq = {} must be <= 65535", rung,
          args.batch, args.q_heads);
  require(args.q_len <= INT32_MAX - rows_per_block && args.kv_len <= INT32_MAX - 128,
          "{}: Sq = {} and Sk = {} must leave room for a tile below 2^31", rung, args.q_len, args.kv_len);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  require(aligned(args.q) && aligned(args.k) && aligned(args.v) && aligned(args.o),
          "{}: Q, K, V and O must start 16-byte aligned (rows are moved in 16-byte pieces)", rung);
  require(args.q_row_stride % 8 == 0 && args.q_head_stride % 8 == 0 && args.q_batch_stride % 8 == 0 &&
              args.kv_row_stride % 8 == 0 && args.kv_head_stride % 8 == 0 && args.kv_batch_stride % 8 == 0,
          "{}: every stride must be a multiple of 8 elements, so that each row starts 16-byte aligned", rung);
}

// Rung 02: CUDA cores, K/V tiles in shared memory, online softmax, O in FP32 registers.
template <typename T>
void attention_fwd_02_tiled_online_softmax(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 03: FlashAttention-2 on mma.sync m16n8k16 + ldmatrix, P reused from registers.
template <typename T>
void attention_fwd_03_fa2_mma_sync(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 04: rung 03 with a cp.async double-buffered K/V pipeline and causal tile skipping.
template <typename T>
void attention_fwd_04_fa2_cp_async(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 05: rung 04 with two 16-row MMA tiles per warp (128 query rows per block).
template <typename T>
void attention_fwd_05_fa2_two_tiles_per_warp(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 05 on the packed variable-length form (cu_seqlens_q/k set, above): each block finds its
// sequence's rows from the offsets, then runs rung 05's block. The dense rungs refuse this form.
template <typename T>
void attention_fwd_varlen_05_fa2_two_tiles_per_warp(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 06 (sm_90a): TMA K/V ring filled by a producer warp, WGMMA for S = Q K^T and O += P V in two
// consumer warpgroups; `cache` keeps the tensor maps between launches on the same operands.
template <typename T>
void attention_fwd_06_tma_wgmma(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 07 (sm_90a): rung 06 with FlashAttention-3's overlap: the two consumers take turns issuing
// WGMMAs (ping-pong), and a tile's softmax runs under the previous tile's P V.
template <typename T>
void attention_fwd_07_fa3_overlap(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 08 (sm_90a): rung 07 in persistent CTAs (one an SM) walking the work items heaviest first.
template <typename T>
void attention_fwd_08_persistent(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 09 (sm_90a): rung 07 with three consumer warpgroups (192 query rows a CTA) at D = 64; D = 128
// runs rung 07's kernel.
template <typename T>
void attention_fwd_09_three_consumers(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 10 (sm_90a): at D = 64, 256-key K/V tiles with the ping-pong alone (no overlap inside a
// warpgroup); D = 128 runs rung 07's kernel.
template <typename T>
void attention_fwd_10_wide_key_tiles(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 11 (sm_90a): rung 09's kernels (rung 07's at D = 128) with the producer waiting for a free
// stage asleep (a suspend-time hint) instead of polling.
template <typename T>
void attention_fwd_11_sleeping_producer(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 12 (sm_90a): rung 11 with the consumers' WGMMA descriptors made once and moved by addition.
template <typename T>
void attention_fwd_12_added_descriptors(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 13 (sm_90a): rung 12 with the softmax's scale folded into the exponent's FFMA (positive
// scales; others run rung 12).
template <typename T>
void attention_fwd_13_scale_in_exponent(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 14 (sm_90a): rung 13 with the consumers whose query rows all lie past Sq leaving at once.
template <typename T>
void attention_fwd_14_rowless_consumers_leave(const AttentionArgs<T>& args, cudaStream_t stream,
                                              HopperLaunchCache& cache);
// Rung 15 (sm_90a): rung 14 with each row's exponent base moved only when its maximum rises by more
// than 8 (log2 units: a factor of 2^8), and O's rescale skipped where a warp's factors are all 1.
template <typename T>
void attention_fwd_15_lazy_rescale(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 17 (sm_90a): rung 15 with 176-key K/V tiles at D = 128 without the mask (two stages); with
// the mask, at D = 64 or for a scale that is not positive it runs rung 15.
template <typename T>
void attention_fwd_17_wide_key_tiles_d128(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache);
// Rung 18 (sm_90a): rung 15's consumers and producer in rung 08's persistent CTAs (three consumers
// at D = 64), the ping-pong's turns running on from one item to the next; a scale that is not
// positive runs rung 15.
template <typename T>
void attention_fwd_18_persistent_turns_run_on(const AttentionArgs<T>& args, cudaStream_t stream,
                                              HopperLaunchCache& cache);
// Rung 19 (sm_90a): rung 18 with the items' query tiles fastest without the mask (the CTAs that run
// at once share a few pairs' K and V); with the mask rung 18's order.
template <typename T>
void attention_fwd_19_pair_tiles_together(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache);
// Rung 20 (sm_90a): rung 19 with the causal items taken in groups of pairs whose K and V fit in
// 16 MiB, heaviest first inside a group; without the mask rung 19.
template <typename T>
void attention_fwd_20_causal_pair_groups(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 25 (sm_90a): rung 20 with each CTA taking its next item when its producer is ready for one
// (an atomic counter in the cache, HopperLaunchCache::work_counters) instead of a fixed stride
// apart; without the mask rung 19's order, taken the same way.
template <typename T>
void attention_fwd_25_dynamic_items(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Rung 26 (sm_90a): rung 15 with every fourth block of 8 keys taking its softmax exponentials on the
// FMA pipe (a polynomial) instead of MUFU, at D = 64; rung 15 at D = 128.
template <typename T>
void attention_fwd_26_exponentials_on_fma(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache);
// Rung 27 (sm_90a): rung 10's 256-key tiles at D = 64 (two consumers, the ping-pong without the
// overlap inside a warpgroup) with rung 15's consumers and producer; rung 15 at D = 128.
template <typename T>
void attention_fwd_27_wide_tiles_lean_softmax(const AttentionArgs<T>& args, cudaStream_t stream,
                                              HopperLaunchCache& cache);
// Rung 16 (sm_80 and later): rung 05 with the softmax of rungs 13 and 15 (the scale inside the
// exponent's FFMA, the base moved only past a factor of 2^8, O's rescale skipped where a warp's
// factors are all 1); a scale that is not positive runs rung 05.
template <typename T>
void attention_fwd_16_fa2_lean_softmax(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 21 (sm_80 and later): rung 16 with two 16-row MMA tiles a warp at D = 128 too (128 query
// rows a block, Q's fragments read from shared memory for each K/V tile) and the copies' addresses
// computed once a tile; a scale that is not positive runs rung 05.
template <typename T>
void attention_fwd_21_fa2_two_tiles_d128(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 22 (sm_80 and later): rung 21 with 32-key K/V tiles (S of both MMA tiles fits beside O
// without spills); a scale that is not positive runs rung 05.
template <typename T>
void attention_fwd_22_fa2_narrow_key_tiles(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 23 (sm_80 and later): rung 21 with each ldmatrix issued a step ahead of the MMAs that read
// it; a scale that is not positive runs rung 05.
template <typename T>
void attention_fwd_23_fa2_fragments_ahead(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 24 (sm_80 and later): rung 23 with the K/V tiles whose keys all exist copied without checks;
// a scale that is not positive runs rung 05.
template <typename T>
void attention_fwd_24_fa2_whole_tile_copies(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 16's kernel with a negative control's flaw: each row keeps its first finite softmax base for
// good (attention/16_fa2_lean_softmax_flawed.cu; not a rung, not registered; positive scales).
template <typename T>
void attention_fwd_16_with_a_base_that_never_moves(const AttentionArgs<T>& args, cudaStream_t stream);
// Rung 15 on the packed variable-length form (sm_90a; cu_seqlens_q/k set): rung 15's CTA on each
// sequence's rows, the tiles wholly inside a sequence by TMA, its partial last Q and K/V tiles
// copied by the producer warp with zeros past the sequence's end; a scale that is not positive
// runs the packed rung 05.
template <typename T>
void attention_fwd_varlen_15_lazy_rescale(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache);
// Its kernel with a negative control's flaw: the partial tiles by TMA too, so a sequence's last
// K/V tile holds its neighbour's keys (attention/varlen_15_lazy_rescale_flawed.cu; not a rung, not
// registered; positive scales; the tensors must hold B x max_seqlen rows).
template <typename T>
void attention_fwd_varlen_15_with_whole_tiles_by_tma(const AttentionArgs<T>& args, cudaStream_t stream,
                                                     HopperLaunchCache& cache);

}  // namespace kc::stage3
