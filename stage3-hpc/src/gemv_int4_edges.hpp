// gemv_int4_edges.hpp — the gemv_int4 op's edge cases, drawn on the host so that a CPU test can
// read them (tests/gemv_int4_test.cpp) and the op's operands can upload them (src/gemv_int4_op.cpp).
// Private to the op and its tests: the public headers (kc/stage3/gemv_int4.hpp, gemv_int4_args.hpp)
// stay as the kernels and the engine see them.
//
// Every problem's scales hold, from the plain draw (w_scales' seed, as before), one group in 32 of
// scale 0 and one in 32 a subnormal half. The non-finite cases below are in the problems whose
// weight holds at most 2^22 weights (N K <= 4 Mi): every conformance problem (the largest 300 x
// 2080) and none of the bench shapes (4096 x 4096 and up), which time the plain draws, byte for
// byte as before the edge cases. Problems named on the command line or in a test follow the same
// rule.
//
// What, drawn from a second generator seeded from the operand's seed (so the other values keep
// their bytes):
//   - in problems of at least 16 rows of w (N >= 16), 1 + N / 256 groups with scale NaN, each in a
//     row of its own: that row's output column is NaN in every row of y (NaN times anything is
//     NaN, in any order of summation), a few columns of y in all, so an output left unwritten
//     (NaN-poisoned) still fails elsewhere. The prepared operands draw the stored weight again
//     from its seeds, so their scale entries carry the same NaN halves.
//   - in x (the plain uniform draw from x's seed), in problems of at least 2 rows: one element of
//     one row NaN, so that row of y is NaN and the others are not.
//
// No Inf, in a scale or in x: its class depends on how a kernel factors a group's sum. The
// reference sums x s (q - z) with w dequantized first: a scale Inf gives Inf x 0 = NaN wherever
// q = z (in most groups), while rung 03 (s sum x (q - z), centred exactly) gives +-Inf, and rungs
// 01, 02 and 04 (s sum x (128 + q) - (128 + z) s sum x) give Inf - Inf = NaN or Inf + Inf = +-Inf
// by the signs of the two sums; rung 05's -z s is 0 x Inf = NaN where z = 0. An Inf in x splits
// the other way: the reference's term Inf s (q - z) is +-Inf where q != z, while rungs 01, 02 and
// 04 see sum x (128 + q) = Inf and sum x = Inf, so Inf - Inf = NaN in every column; and rung 05
// scales x's row to fp16 by its largest magnitude, which an Inf makes meaningless. The harness
// wants NaN where the reference is NaN and exactly the reference's Inf where it is Inf
// (common/include/kc/common/compare_element.hpp), so neither is part of the op's definition.
#pragma once

#include <cstdint>
#include <vector>

#include "kc/common/op_builder.hpp"
#include "kc/stage3/int4_groups.hpp"
#include "src/weight_only_gemv_edges.hpp"

namespace kc::stage3 {

// Which problems carry the non-finite edge cases above (weight_only_gemv_has_edge_cases), the NaN
// in x (weight_only_gemv_nan_x_index) and the rows of the NaN groups: src/weight_only_gemv_edges.hpp,
// shared with the GGUF GEMV.

// w_scales ([N, K / G] IEEE half bits) as the op's fill draws them from that operand's seed:
// zero and subnormal groups always, NaN groups where the problem has edge cases.
std::vector<std::uint16_t> gemv_int4_draw_scales(const Problem& problem, std::uint64_t seed);

// The stored weight (qweight, scales, zeros) the op draws for a run, from the seed of any of its
// operands (build_op seeds operand i of a run with run x 16 + i): what its prepared operands
// prepare.
Int4GroupHost gemv_int4_draw_weight(const Problem& problem, std::uint64_t operand_seed);

// The op's host reference: the stored weight (w_qweight, w_scales, w_zeros, as doubles) dequantized
// in double (a NaN scale to NaN weights), times x, summed in double: y.
HostTensors gemv_int4_host_reference(const Problem& problem, const HostTensors& inputs);

}  // namespace kc::stage3
