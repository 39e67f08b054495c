// Files the FlashAttention ladder (stage3-hpc/attention/) with the registry: rung 01, the unfused
// cuBLAS path, then the fused rungs, each for bf16 and f16 and D = 64 or 128; then the packed
// variable-length form's op (attention_fwd_varlen) and its rungs (05, and 15 on Hopper).
#include "register_attention.hpp"

#include <fmt/format.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <memory>
#include <utility>

#include "arch/sm90/tma_descriptor.hpp"

#include "kc/stage3/attention_args.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_varlen.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

constexpr int kAmpere = 80;
constexpr int kHopper = 90;
constexpr const char* kFlashConstraints = "D = 64 or 128";
// The docs table the attention rungs, prefill and decode, are reported in (kc-bench --markdown),
// beside stage3-gemm.
constexpr const char* kAttentionReportGroup = "stage3-attention";

template <typename T>
AttentionArgs<T> attention_args(const Problem& problem, Operands& operands) {
  const AttentionShape shape = attention_shape(problem);
  AttentionArgs<T> args;
  args.q = operands["Q"].data<T>();
  args.k = operands["K"].data<T>();
  args.v = operands["V"].data<T>();
  args.o = operands["O"].data<T>();
  args.lse = operands["LSE"].data<float>();
  args.batch = static_cast<int>(shape.batch);
  args.q_heads = static_cast<int>(shape.q_heads);
  args.kv_heads = static_cast<int>(shape.kv_heads);
  args.q_len = static_cast<int>(shape.q_len);
  args.kv_len = static_cast<int>(shape.kv_len);
  args.head_dim = static_cast<int>(shape.head_dim);
  // Contiguous [B, H, S, D] (attention.hpp's layout).
  args.q_row_stride = shape.head_dim;
  args.q_head_stride = shape.q_len * shape.head_dim;
  args.q_batch_stride = shape.q_heads * args.q_head_stride;
  args.kv_row_stride = shape.head_dim;
  args.kv_head_stride = shape.kv_len * shape.head_dim;
  args.kv_batch_stride = shape.kv_heads * args.kv_head_stride;
  args.scale = static_cast<float>(attention_scale(problem));
  args.causal = attention_causal(problem);
  return args;
}

using FlashLaunchBf16 = void (*)(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
using FlashLaunchF16 = void (*)(const AttentionArgs<__half>&, cudaStream_t);

KernelEntry attention_entry(const std::string& name, int rung, std::string idea) {
  return attention_kernel_entry(kAttentionFwdOp, name, rung, std::move(idea));
}

// A fused rung's entry without its launch: what it supports (D = 64 or 128) and refuses.
KernelEntry fused_entry(const std::string& name, int rung, std::string idea) {
  KernelEntry entry = attention_entry(name, rung, std::move(idea));
  entry.constraints = kFlashConstraints;
  entry.supports = &flash_attention_shape_error;
  entry.refuses = flash_attention_refusals();
  return entry;
}

KernelEntry flash_entry(const std::string& name, int rung, std::string idea, FlashLaunchBf16 launch_bf16,
                        FlashLaunchF16 launch_f16) {
  KernelEntry entry = fused_entry(name, rung, std::move(idea));
  entry.launch = [launch_bf16, launch_f16](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      launch_bf16(attention_args<__nv_bfloat16>(problem, operands), stream);
    else
      launch_f16(attention_args<__half>(problem, operands), stream);
  };
  return entry;
}

using HopperFlashLaunchBf16 = void (*)(const AttentionArgs<__nv_bfloat16>&, cudaStream_t, HopperLaunchCache&);
using HopperFlashLaunchF16 = void (*)(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

// A fused rung with sm_90a machine code (TMA, WGMMA, setmaxnreg): compute capability 9.0 only,
// with its own cache of tensor maps.
KernelEntry hopper_flash_entry(const std::string& name, int rung, std::string idea,
                               HopperFlashLaunchBf16 launch_bf16, HopperFlashLaunchF16 launch_f16) {
  KernelEntry entry = fused_entry(name, rung, std::move(idea));
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  auto cache = std::make_shared<HopperLaunchCache>();
  entry.launch = [launch_bf16, launch_f16, cache](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      launch_bf16(attention_args<__nv_bfloat16>(problem, operands), stream, *cache);
    else
      launch_f16(attention_args<__half>(problem, operands), stream, *cache);
  };
  return entry;
}

// attention_fwd_varlen's rung 05: rung 05's block on the packed form (attention/varlen_05_*.cu).
KernelEntry varlen_entry() {
  KernelEntry entry = attention_kernel_entry(
      kAttentionVarlenOp, "05_fa2_two_tiles_per_warp", 5,
      "rung 05's block on the packed form: each block reads its sequence's offsets (cu_seqlens) and runs its own "
      "Sq_b x Sk_b, mask and zero fill at the sequence's end; one launch for the batch");
  entry.constraints = kFlashConstraints;
  entry.supports = &flash_attention_shape_error;
  entry.refuses = varlen_attention_refusals();
  entry.launch = [](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      attention_fwd_varlen_05_fa2_two_tiles_per_warp(varlen_attention_args<__nv_bfloat16>(problem, operands), stream);
    else
      attention_fwd_varlen_05_fa2_two_tiles_per_warp(varlen_attention_args<__half>(problem, operands), stream);
  };
  return entry;
}

// attention_fwd_varlen's rung 15: rung 15's CTA on the packed form (attention/varlen_15_*.cu),
// compute capability 9.0 only, with its own cache of tensor maps.
KernelEntry varlen_hopper_entry() {
  KernelEntry entry = attention_kernel_entry(
      kAttentionVarlenOp, "15_lazy_rescale", 15,
      "rung 15's CTA (TMA + WGMMA, FlashAttention-3's overlap) on the packed form: each CTA reads its sequence's "
      "offsets; the tiles wholly inside a sequence come by TMA, its partial last Q and K/V tiles are copied by the "
      "producer warp with zeros past the sequence's end; one launch for the batch");
  entry.constraints = kFlashConstraints;
  entry.supports = &flash_attention_shape_error;
  entry.refuses = varlen_attention_refusals();
  entry.min_compute_capability = kHopper;
  entry.max_compute_capability = kHopper;
  auto cache = std::make_shared<HopperLaunchCache>();
  entry.launch = [cache](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      attention_fwd_varlen_15_lazy_rescale(varlen_attention_args<__nv_bfloat16>(problem, operands), stream, *cache);
    else
      attention_fwd_varlen_15_lazy_rescale(varlen_attention_args<__half>(problem, operands), stream, *cache);
  };
  return entry;
}

}  // namespace

template <typename T>
AttentionArgs<T> varlen_attention_args(const Problem& problem, Operands& operands) {
  const VarlenShape shape = varlen_shape(problem);
  AttentionArgs<T> args;
  args.q = operands["Q"].data<T>();
  args.k = operands["K"].data<T>();
  args.v = operands["V"].data<T>();
  args.o = operands["O"].data<T>();
  args.lse = operands["LSE"].data<float>();
  args.cu_seqlens_q = operands["cu_seqlens_q"].data<std::int32_t>();
  args.cu_seqlens_k = operands["cu_seqlens_k"].data<std::int32_t>();
  args.batch = static_cast<int>(shape.batch);
  args.q_heads = static_cast<int>(shape.q_heads);
  args.kv_heads = static_cast<int>(shape.kv_heads);
  args.q_len = static_cast<int>(shape.max_q_len);  // max_seqlen_q: sizes the grid
  args.kv_len = static_cast<int>(shape.max_kv_len);
  args.head_dim = static_cast<int>(shape.head_dim);
  // Packed [total, H, D] rows (attention.hpp's packed layout); no batch stride.
  args.q_row_stride = shape.q_heads * shape.head_dim;
  args.q_head_stride = shape.head_dim;
  args.q_batch_stride = 0;
  args.kv_row_stride = shape.kv_heads * shape.head_dim;
  args.kv_head_stride = shape.head_dim;
  args.kv_batch_stride = 0;
  args.scale = static_cast<float>(attention_scale(problem));
  args.causal = attention_causal(problem);
  return args;
}

template AttentionArgs<__nv_bfloat16> varlen_attention_args<__nv_bfloat16>(const Problem&, Operands&);
template AttentionArgs<__half> varlen_attention_args<__half>(const Problem&, Operands&);

const std::vector<std::string>& varlen_attention_refusals() {
  static const std::vector<std::string> refusals = {"6x2x1x33x45x80 bf16 causal=1 lengths=1",
                                                    "6x2x1x33x45x80 f16 causal=1 lengths=1"};
  return refusals;
}

KernelEntry attention_kernel_entry(const std::string& op, const std::string& name, int rung, std::string idea) {
  return rung_entry(op, name, rung, std::move(idea), {DType::bf16, DType::f16}, kAttentionReportGroup, kAmpere);
}

std::string flash_attention_shape_error(const Problem& problem) {
  const AttentionShape s = attention_shape(problem);
  if (s.head_dim != 64 && s.head_dim != 128)
    return fmt::format("head dimension D = {} is not compiled: the fused rungs are built for D = 64 and "
                       "D = 128 (D is a template parameter, so that the loops over it unroll and O's "
                       "accumulators stay in registers)",
                       s.head_dim);
  constexpr std::int64_t kMaxLength = std::int64_t{1} << 30;
  if (s.q_len > kMaxLength || s.kv_len > kMaxLength || s.batch > 65535 || s.q_heads > 65535)
    return fmt::format("Sq = {} and Sk = {} must be at most 2^30 (32-bit row indices) and B = {} and Hq = {} "
                       "at most 65535 (grid dimensions)",
                       s.q_len, s.kv_len, s.batch, s.q_heads);
  return {};
}

const std::vector<std::string>& flash_attention_refusals() {
  static const std::vector<std::string> refusals = {"1x2x1x33x45x80 bf16 causal=1", "1x2x1x33x45x80 f16 causal=1"};
  return refusals;
}

LaunchFn attention_16_with_a_base_that_never_moves() {
  return [](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      attention_fwd_16_with_a_base_that_never_moves(attention_args<__nv_bfloat16>(problem, operands), stream);
    else
      attention_fwd_16_with_a_base_that_never_moves(attention_args<__half>(problem, operands), stream);
  };
}

void register_attention_kernels(Registry& registry) {
  KernelEntry unfused = attention_entry(
      "01_naive_unfused", 1, "cuBLAS S = scale.Q.K^T (FP32), masked softmax kernel, cuBLAS O = P.V: S materialized");
  unfused.launch = attention_01_naive_unfused();
  registry.add_kernel(std::move(unfused));

  registry.add_kernel(flash_entry("02_tiled_online_softmax", 2,
                                  "CUDA cores: K/V tiles in shared memory, online softmax, O in FP32 registers",
                                  &attention_fwd_02_tiled_online_softmax<__nv_bfloat16>,
                                  &attention_fwd_02_tiled_online_softmax<__half>));
  registry.add_kernel(flash_entry("03_fa2_mma_sync", 3,
                                  "FlashAttention-2 on mma.sync + ldmatrix: P stays in registers as the A operand",
                                  &attention_fwd_03_fa2_mma_sync<__nv_bfloat16>,
                                  &attention_fwd_03_fa2_mma_sync<__half>));
  registry.add_kernel(flash_entry("04_fa2_cp_async", 4,
                                  "cp.async double-buffered K/V, causal tiles skipped, mask on diagonal tiles only",
                                  &attention_fwd_04_fa2_cp_async<__nv_bfloat16>,
                                  &attention_fwd_04_fa2_cp_async<__half>));
  registry.add_kernel(flash_entry("05_fa2_two_tiles_per_warp", 5,
                                  "D = 64: two 16-row MMA tiles per warp, each K/V fragment feeds two MMAs; D = 128 as rung 04",
                                  &attention_fwd_05_fa2_two_tiles_per_warp<__nv_bfloat16>,
                                  &attention_fwd_05_fa2_two_tiles_per_warp<__half>));
  registry.add_kernel(hopper_flash_entry(
      "06_tma_wgmma", 6,
      "Hopper: TMA K/V ring filled by a producer warp, WGMMA for S = QK^T and O += PV (P from registers) in two "
      "consumer warpgroups, setmaxnreg",
      &attention_fwd_06_tma_wgmma<__nv_bfloat16>, &attention_fwd_06_tma_wgmma<__half>));
  registry.add_kernel(hopper_flash_entry(
      "07_fa3_overlap", 7,
      "FlashAttention-3's overlap: the consumers take turns issuing WGMMAs (ping-pong), a tile's softmax runs under "
      "the previous tile's PV",
      &attention_fwd_07_fa3_overlap<__nv_bfloat16>, &attention_fwd_07_fa3_overlap<__half>));
  registry.add_kernel(hopper_flash_entry(
      "08_persistent", 8,
      "rung 07 in persistent CTAs (one an SM) walking the (query tile, head) items heaviest first; the next item's "
      "K/V and Q load while the current one finishes",
      &attention_fwd_08_persistent<__nv_bfloat16>, &attention_fwd_08_persistent<__half>));
  registry.add_kernel(hopper_flash_entry(
      "09_three_consumers", 9,
      "D = 64: rung 07 with three consumer warpgroups, 192 query rows a CTA (24 + 3 x 160 registers), the ping-pong's "
      "turn going round three; D = 128 runs rung 07",
      &attention_fwd_09_three_consumers<__nv_bfloat16>, &attention_fwd_09_three_consumers<__half>));
  registry.add_kernel(hopper_flash_entry(
      "10_wide_key_tiles", 10,
      "D = 64: 256-key K/V tiles (S on m64n256k16) with the ping-pong between two consumers but no overlap inside "
      "a warpgroup, so S, P and O fit in 240 registers; D = 128 runs rung 07",
      &attention_fwd_10_wide_key_tiles<__nv_bfloat16>, &attention_fwd_10_wide_key_tiles<__half>));
  registry.add_kernel(hopper_flash_entry(
      "11_sleeping_producer", 11,
      "rung 09's kernels (rung 07's at D = 128) with the producer waiting for a free stage asleep (try_wait with a "
      "suspend-time hint) instead of polling, leaving its scheduler's issue slots to the consumers",
      &attention_fwd_11_sleeping_producer<__nv_bfloat16>, &attention_fwd_11_sleeping_producer<__half>));
  registry.add_kernel(hopper_flash_entry(
      "12_added_descriptors", 12,
      "rung 11 with the consumers' WGMMA descriptors made once and moved by adding each operand's offset, instead "
      "of built from its address before every WGMMA",
      &attention_fwd_12_added_descriptors<__nv_bfloat16>, &attention_fwd_12_added_descriptors<__half>));
  registry.add_kernel(hopper_flash_entry(
      "13_scale_in_exponent", 13,
      "rung 12 with the softmax's maximum taken over the raw scores and the scale folded into the exponent's FFMA "
      "(one FMUL a score fewer; a scale that is not positive runs rung 12's kernels)",
      &attention_fwd_13_scale_in_exponent<__nv_bfloat16>, &attention_fwd_13_scale_in_exponent<__half>));
  registry.add_kernel(hopper_flash_entry(
      "14_rowless_consumers_leave", 14,
      "rung 13 with the consumer warpgroups whose query rows all lie past Sq (the last query tile's) leaving at "
      "once, the stages' barriers and the ping-pong's turns counting the others",
      &attention_fwd_14_rowless_consumers_leave<__nv_bfloat16>, &attention_fwd_14_rowless_consumers_leave<__half>));
  registry.add_kernel(hopper_flash_entry(
      "15_lazy_rescale", 15,
      "rung 14 with each row's softmax base moved only when its maximum rises by more than 8 (log2 units), so "
      "most tiles' rescale factors are 1 and a warp whose factors all are skips O's multiply",
      &attention_fwd_15_lazy_rescale<__nv_bfloat16>, &attention_fwd_15_lazy_rescale<__half>));
  registry.add_kernel(flash_entry("16_fa2_lean_softmax", 16,
                                  "rung 05 on mma.sync with the softmax of rungs 13 and 15: the scale inside the "
                                  "exponent's FFMA, the base moved only past a rise of 8 (log2 units), O's rescale "
                                  "skipped where a warp's factors are all 1",
                                  &attention_fwd_16_fa2_lean_softmax<__nv_bfloat16>,
                                  &attention_fwd_16_fa2_lean_softmax<__half>));
  registry.add_kernel(hopper_flash_entry(
      "17_wide_key_tiles_d128", 17,
      "rung 15 with 176-key K/V tiles at D = 128 without the mask (FlashAttention-3's tile; two stages): a tile's "
      "fixed work spread over more keys; causal and D = 64 run rung 15",
      &attention_fwd_17_wide_key_tiles_d128<__nv_bfloat16>, &attention_fwd_17_wide_key_tiles_d128<__half>));
  registry.add_kernel(hopper_flash_entry(
      "18_persistent_turns_run_on", 18,
      "rung 15's consumers in rung 08's persistent CTAs (three at D = 64), the ping-pong's turns running on from one "
      "item to the next: the first consumer issues the next item's S while the others finish and store",
      &attention_fwd_18_persistent_turns_run_on<__nv_bfloat16>, &attention_fwd_18_persistent_turns_run_on<__half>));
  registry.add_kernel(hopper_flash_entry(
      "19_pair_tiles_together", 19,
      "rung 18 with the items' query tiles fastest without the mask, so the CTAs that run at once share the K and V "
      "of a few (batch, head) pairs; with the mask rung 18's heaviest-first order",
      &attention_fwd_19_pair_tiles_together<__nv_bfloat16>, &attention_fwd_19_pair_tiles_together<__half>));
  registry.add_kernel(hopper_flash_entry(
      "20_causal_pair_groups", 20,
      "rung 19 with the causal items taken in groups of (batch, head) pairs whose K and V fit in 16 MiB of L2, "
      "heaviest first inside each group; without the mask rung 19",
      &attention_fwd_20_causal_pair_groups<__nv_bfloat16>, &attention_fwd_20_causal_pair_groups<__half>));
  registry.add_kernel(hopper_flash_entry(
      "25_dynamic_items", 25,
      "rung 20 with each persistent CTA taking its next item when its producer is ready for one (an atomic counter) "
      "instead of every gridDim-th: the CTAs' work evens out under the causal mask",
      &attention_fwd_25_dynamic_items<__nv_bfloat16>, &attention_fwd_25_dynamic_items<__half>));
  registry.add_kernel(hopper_flash_entry(
      "26_exponentials_on_fma", 26,
      "rung 15 with a quarter of the softmax's exponentials computed on the FMA pipe (a degree-4 polynomial and "
      "2^n in the exponent bits) instead of MUFU, where at D = 64 they take as long as the MMAs; D = 128 runs rung 15",
      &attention_fwd_26_exponentials_on_fma<__nv_bfloat16>, &attention_fwd_26_exponentials_on_fma<__half>));
  registry.add_kernel(hopper_flash_entry(
      "27_wide_tiles_lean_softmax", 27,
      "rung 10's 256-key tiles at D = 64 (cuDNN's tile there) with rung 15's consumers and producer: each tile's "
      "fixed work spread over twice the keys, the ping-pong without the overlap inside a warpgroup; D = 128 runs "
      "rung 15",
      &attention_fwd_27_wide_tiles_lean_softmax<__nv_bfloat16>, &attention_fwd_27_wide_tiles_lean_softmax<__half>));
  registry.add_kernel(flash_entry("21_fa2_two_tiles_d128", 21,
                                  "rung 16 with two 16-row MMA tiles a warp at D = 128 as at D = 64 (FlashAttention-2's "
                                  "128 x 64 block): each K and V fragment feeds two MMAs; Q's fragments read from "
                                  "shared memory a K/V tile, the copies' addresses computed once a tile",
                                  &attention_fwd_21_fa2_two_tiles_d128<__nv_bfloat16>,
                                  &attention_fwd_21_fa2_two_tiles_d128<__half>));
  registry.add_kernel(flash_entry("22_fa2_narrow_key_tiles", 22,
                                  "rung 21 with 32-key K/V tiles: S of both MMA tiles fits beside O without spills, "
                                  "at twice the tiles' fixed work a key (FlashAttention-2's 128 x 32 block)",
                                  &attention_fwd_22_fa2_narrow_key_tiles<__nv_bfloat16>,
                                  &attention_fwd_22_fa2_narrow_key_tiles<__half>));
  registry.add_kernel(flash_entry("23_fa2_fragments_ahead", 23,
                                  "rung 21 with each ldmatrix issued a step ahead of the MMAs that read it (two "
                                  "fragment buffers, as FlashAttention-2's gemm), the slices' XOR offsets split",
                                  &attention_fwd_23_fa2_fragments_ahead<__nv_bfloat16>,
                                  &attention_fwd_23_fa2_fragments_ahead<__half>));
  registry.add_kernel(flash_entry("24_fa2_whole_tile_copies", 24,
                                  "rung 23 with the K/V tiles whose keys all exist copied without checks (one pointer "
                                  "moved a pass of rows a chunk; the block's last tile keeps rung 23's zero-filling copy)",
                                  &attention_fwd_24_fa2_whole_tile_copies<__nv_bfloat16>,
                                  &attention_fwd_24_fa2_whole_tile_copies<__half>));

  // The packed variable-length form (kc/stage3/attention_varlen.hpp): its op, then its rungs.
  if (!registry.has_op(kAttentionVarlenOp)) registry.add_op(make_attention_varlen_op());
  registry.add_kernel(varlen_entry());
  registry.add_kernel(varlen_hopper_entry());
}

}  // namespace kc::stage3
