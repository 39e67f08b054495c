// kc/testing/negative_controls.hpp — deliberately wrong kernels: a test of the tests.
//
// Each has one realistic flaw. The conformance machinery must report every one of them as
// failing; kc-bench --include-negative-controls must report them FAILED and never time them.
#pragma once

#include <string>
#include <vector>

#include "kc/common/registry.hpp"

namespace kc::testing {

struct NegativeControl {
  std::string id;    // "stage1/sgemm/nc_writes_nothing", "stage3/attention_fwd/nc_wrong_scale"
  std::string flaw;  // what is wrong with it
};

// The controls, in registration order.
std::vector<NegativeControl> negative_controls();

// The registry entry every control starts from: id `id` (stage/op/nc_name), op `op`, rung 0 (on no
// ladder), the idea "NEGATIVE CONTROL: <flaw>", the dtypes it runs and the negative-controls
// report. The caller adds the launch and, where the flawed kernel has them, its limits (compute
// capability, shapes it supports).
KernelEntry negative_control_entry(std::string id, std::string op, const std::string& flaw,
                                   std::vector<DType> dtypes);

// Registers the ops they implement (sgemm; stage 3's hgemm, gemm_bias_gelu, attention_fwd and
// attention_decode_paged) if missing, and the controls, in the "negative-controls" report group:
// FP32 SGEMM kernels with one flaw each, bf16 GEMMs with the flaws the bf16 bounds must catch at the benchmark shapes, and
// attention kernels (bf16 and f16) with a wrong scale, an off-by-one causal mask, a skipped K/V
// tile, grouped GEMMs with a routing mistake, FP8 GEMMs (plain and grouped) with a promotion or scale mistake, INT8 GEMMs with a K step dropped or the scales swapped, and paged decode kernels (bf16 and f16) that take pages as contiguous, read the NaN rows
// past a sequence's length, drop the mask among the new tokens, or divide 0 by 0 for an empty row.
void register_negative_controls(Registry& registry);

// The grouped GEMM's controls (grouped_gemm_controls.cpp), part of the two above: cuBLAS per
// expert with one routing mistake each (output at the previous expert's rows, the next expert's
// weights, an even split whatever the routing).
std::vector<NegativeControl> grouped_gemm_controls();
void register_grouped_gemm_controls(Registry& registry);

// The FP8 GEMM's controls (fp8_gemm_controls.cpp), part of the two above: its rung 01 kernel
// without the FP32 promotion, with a scale applied twice, and with the next K block's scales
// (compute capability 9.0 only).
std::vector<NegativeControl> fp8_gemm_controls();
void register_fp8_gemm_controls(Registry& registry);

// The FP8 grouped GEMM's control (fp8_grouped_gemm_controls.cpp), part of the two above: its rung
// 01 kernel scaling each expert's products with the next expert's weight scales
// (stage3/fp8_grouped_gemm/nc_neighbours_weight_scales; compute capability 9.0 only).
std::vector<NegativeControl> fp8_grouped_gemm_controls();
void register_fp8_grouped_gemm_controls(Registry& registry);

// The INT8 GEMM's controls (int8_gemm_controls.cpp), part of the two above: its rung 01 kernel
// with the last K step dropped (both ops) and with the row and column scales swapped (the
// dequantizing op), rung 02's with the s32 TMA box misplaced (compute capability 9.0 only), and
// rung 03's (mma.sync) with the lower rows of each fragment given the upper rows' scale.
std::vector<NegativeControl> int8_gemm_controls();
void register_int8_gemm_controls(Registry& registry);

// The small-M GEMM's controls (small_m_gemm_controls.cpp), part of the two above: rung 14's kernel
// whose last CTA adds one split's partial sums twice (stage3/hgemm/nc_split_k_partials_added_twice),
// and rung 16's (Hopper) whose cluster adds rank 0's partial tile in place of the last rank's
// (stage3/hgemm/nc_cluster_split_reads_rank_0_twice).
std::vector<NegativeControl> small_m_gemm_controls();
void register_small_m_gemm_controls(Registry& registry);

// The GGUF quantize op's control (quantize_gguf_controls.cpp), part of the two above: rung 01's
// kernel with the nibble order of q4 blocks swapped (stage3/quantize_gguf/nc_swapped_nibbles).
std::vector<NegativeControl> quantize_gguf_controls();
void register_quantize_gguf_controls(Registry& registry);

// The int4 GEMV's controls (gemv_int4_controls.cpp), part of the two above: rung 01's kernel with
// the nibbles of each pair exchanged, each group given the next group's scale entry, every zero
// point read as 8, and the scale multiplied in twice; rung 03's centring each row on the zero
// point of the row 8 apart (stage3/gemv_int4/nc_*).
std::vector<NegativeControl> gemv_int4_controls();
void register_gemv_int4_controls(Registry& registry);

// The int4 quantize op's control (quantize_int4_controls.cpp), part of the two above: rung 02's
// kernel without its exact path near ties (stage3/quantize_int4/nc_without_tie_path).
std::vector<NegativeControl> quantize_int4_controls();
void register_quantize_int4_controls(Registry& registry);

// The paged decode's merge and RoPE controls (decode_fused_combine_controls.cpp), part of the two
// above: decode rung 04's kernel whose merge leaves out the sequence's last used split
// (stage3/attention_decode_paged/nc_merge_drops_last_split), and decode rung 06's kernel rotating
// the new tokens by the previous position's angle
// (stage3/attention_decode_paged_rope/nc_rope_position_off_by_one), and decode rung 07's kernel
// copying the new tokens' rows from their pages before the wait
// (stage3/attention_decode_paged_rope/nc_new_rows_copied_before_wait), and decode rung 08's kernel
// reading every row of a tile from the block of its first key
// (stage3/attention_decode_paged_rope/nc_page_walk_one_page_per_tile), and decode rung 09's kernel
// storing each split's partials in the slot of its index in rung 08's grid order
// (stage3/attention_decode_paged_rope/nc_partials_in_rung08_slots).
std::vector<NegativeControl> decode_fused_combine_controls();
void register_decode_fused_combine_controls(Registry& registry);

}  // namespace kc::testing
