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

namespace kc::stage3 {

class HopperLaunchCache;  // arch/sm90/tma_descriptor.hpp: the Hopper rungs' tensor maps

// T: __nv_bfloat16 or __half. Q and O are [B, Hq, Sq, D], K and V [B, Hkv, Sk, D], each with the
// element strides below and the last dimension contiguous; LSE is a contiguous [B, Hq, Sq] of f32.
template <typename T>
struct AttentionArgs {
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

// The head dimensions the fused rungs (02-05) are compiled for: a template parameter, so that the
// loops over D unroll and O's accumulators stay in registers.
inline constexpr int kFlashHeadDims[] = {64, 128};

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

}  // namespace kc::stage3
