// kc/stage3/gemv_int4.hpp — the gemv_int4 op: weight-only GEMV on 4-bit weights with group-wise
// scales and zero points (GPTQ/AWQ). What it computes, the stored form and the prepared layout:
// kc/stage3/gemv_int4_args.hpp; the host quantizer, dequantizer, prepare and checkpoint reader:
// kc/stage3/int4_groups.hpp.
//
// Problem dimensions M, N, K ("1x4096x4096"): y [M, N] = x [M, K] . w^T, M <= 64 (rungs 01 and 02
// take up to 16, rung 03 up to 64); parameter
// `group_size` (G, default 128): 32, 64 or a multiple of 128 that divides K. Operands: x bf16 ~
// uniform(-1, 1); the stored weight — w_qweight (i8 [N, K / 2], the nibbles uniform over 0..15),
// w_scales (f16 [N, K / G]: positive normal halves in [2^-10, 2^-4], with one group in 32 of scale
// 0 and one in 32 a subnormal half; in the conformance problems also a few NaN groups, and one NaN
// in x: src/gemv_int4_edges.hpp) and w_zeros (i8 [N, K / G], uniform over 0..15); w_quants and
// w_group_scales, the prepared layout of that same weight (prepare_int4_groups on the host, drawn
// again from the stored operands' seeds), which the rungs read; y bf16. Reference: the stored
// weight dequantized on the host in double (dequantize_int4_groups, never the prepared bytes),
// then the product in double. Bytes: x and y once and the prepared weight once (quants and scale
// entries, what a rung must stream). Baseline: a copy of those bytes (the op is memory-bound; % of
// baseline is % of copy bandwidth on the packed bytes).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/gemv_int4.hpp, the op's harness side: kernels include gemv_int4_args.hpp"
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/gemv_int4_args.hpp"
#include "kc/stage3/int4_groups.hpp"

namespace kc::stage3 {

inline constexpr const char* kGemvInt4Op = "gemv_int4";

// The group size a problem asks for (kc::Error for one that is not a whole number).
int gemv_int4_group_size(const Problem& problem);

// "" when the problem's parameter group_size is a whole number the layout takes (32, 64 or a
// multiple of 128) that divides `k`, otherwise why not: the rule gemv_int4 and quantize_int4 share.
std::string int4_group_size_error(const Problem& problem, std::int64_t k);

// "" when the op defines `problem` (M in [1, 64], a supported group size that divides K),
// otherwise why not.
std::string gemv_int4_shape_error(const Problem& problem);

// "" when a rung that takes up to `max_rows` rows of x runs `problem`, otherwise why not; and the
// labels of the op's conformance problems such a rung refuses (rungs 01 and 02: 16 rows).
std::string gemv_int4_rows_error(const Problem& problem, int max_rows);
std::vector<std::string> gemv_int4_refusals(int max_rows);

OpSpec make_gemv_int4_op();

// The launch arguments of `problem` on its operands: x, y, and the prepared weight.
Int4GemvArgs gemv_int4_args(const Problem& problem, Operands& operands);

}  // namespace kc::stage3
