// kc/stage3/quantize_int4.hpp — bf16 weights to 4-bit groups with scales and zero points: the
// quantize_int4 op, its public entry and its registration. What is computed, the output layout
// and what zeros, NaN, Inf and ranges past a half scale become: kc/stage3/quantize_int4_args.hpp.
//
// Problem dimensions rows, K ("4096x4096"); parameter `group_size` (G, default 128): 32, 64 or a
// multiple of 128 that divides K. Operand x [rows, K] bf16 ~ uniform(-1, 1) with edge groups
// mixed in by position: all zeros, one NaN, one +Inf, values near 2^-20 (scales that are
// subnormal halves or round to zero) and values near 3 x 10^6 (ranges past a half scale). Outputs
// qweight (i8 [rows, K / 2]), scales (the half bits as bytes, i8 [rows, 2 K / G]) and zeros (i8
// [rows, K / G]), poisoned before the run. Reference: quantize_int4_groups_reference
// (kc/stage3/gemv_int4.hpp) on the host; every byte must match (integer outputs: tolerance 0).
// Bytes: x once and the outputs once. Baseline: a copy of those bytes (% of baseline is % of copy
// bandwidth).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/quantize_int4.hpp, the op's harness side: kernels include quantize_int4_args.hpp"
#endif

#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/quantize_int4_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kQuantizeInt4Op = "quantize_int4";

// The public entry: x [rows, K] bf16 to the stored form at args.qweight, args.scales and
// args.zeros (device buffers of rows x K / 2, rows x K / G halves and rows x K / G bytes), as
// quantize_int4_groups_reference writes it. Checks its arguments first (check_quantize_int4_args,
// kc/stage3/quantize_int4_args.hpp; nothing runs on bad input), then runs
// the fastest rung measured for its group size asynchronously on `stream` (stage3/quantize_int4/
// 04_corrected_quotient for G = 32 to 512, 06_cta_per_long_group past that);
// allocates nothing. prepare_int4_groups_on_device then makes the GEMV's layout of it.
void quantize_int4_groups(const QuantizeInt4Args& args, cudaStream_t stream);

// "" when the op defines `problem` (a supported group size that divides K), otherwise why not.
std::string quantize_int4_shape_error(const Problem& problem);

QuantizeInt4Args quantize_int4_args(const Problem& problem, Operands& operands);

OpSpec make_quantize_int4_op();

// The labels of the op's conformance problems the op refuses (kept to show the refusal).
std::vector<std::string> quantize_int4_refusals();

void register_quantize_int4_kernels(Registry& registry);

}  // namespace kc::stage3
