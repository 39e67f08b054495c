// gemv_gguf_edges.hpp — the gemv_gguf op's edge cases (issue 15: "scale edge cases"), drawn on the
// host so that a CPU test can read them (tests/gemv_gguf_test.cpp) and the op's operands can upload
// them (src/gemv_gguf_op.cpp); and rung 01's instance with a wrong block index, the negative control
// the edge cases must not hide (tests/gemv_gguf_gpu_test.cpp). Private to the op and its tests: the
// public headers (kc/stage3/gemv_gguf.hpp, gemv_gguf_args.hpp) stay as the kernels and the engine
// see them.
//
// Which problems: those whose weight holds at most 2^22 weights (N K <= 4 Mi): every conformance
// problem (the largest 300 x 2080) and none of the bench shapes (4096 x 4096 and up), which time
// the plain draws, byte for byte as before the edge cases. Problems named on the command line or in
// a test follow the same rule.
//
// What, in w's blocks (the plain draw first, from w's seed as before; the edge cases from a second
// generator seeded from it, so the other blocks keep their bytes), by block index b (row after row)
// modulo 8:
//   1  d = +0; q4_1 also m = +0 (every weight 0)
//   3  d = -0; q4_1 keeps its drawn m (every weight m, nonzero)
//   5  d a subnormal half: +-j 2^-24, j in [1, 1023] (below 2^-14, fp16's smallest normal)
//   6  q4_1 only: m a subnormal half the same way (d as drawn)
// and, in problems of at least 16 rows of w (N >= 16), 1 + N / 256 blocks with d = NaN, each in its
// own row: that row's output column is NaN in every row of y (NaN times anything is NaN, in any
// order of summation), a few columns of y in all, so an output left unwritten (NaN-poisoned) still
// fails elsewhere. In x (the plain uniform draw from x's seed), in problems of at least 2 rows: one
// element of one row NaN, so that row of y is NaN and the others are not.
//
// No Inf, in d or in x: its class depends on how a kernel factors a block's sum. For q4_1 with d =
// Inf, the reference's weight d q + m is NaN where q = 0 (Inf x 0), so y is NaN, while a kernel
// computing d sum(x q) + m sum(x) (rungs 03 on) gets +-Inf. An Inf in x splits the same way: rung
// 03's d sum(x (128 + q)) - 136 d sum(x) for q4_0 is Inf - Inf = NaN where the reference's terms
// x d (q - 8) give +-Inf. The harness wants NaN where the reference is NaN and exactly the
// reference's Inf where it is Inf (common/include/kc/common/compare_element.hpp), so neither is
// part of the op's definition.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kc/common/problem.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "src/weight_only_gemv_edges.hpp"

namespace kc::stage3 {

// Which problems carry the edge cases above (weight_only_gemv_has_edge_cases), the NaN in x
// (weight_only_gemv_nan_x_index) and the rows of the NaN scales: src/weight_only_gemv_edges.hpp,
// shared with the int4 GEMV.

// The blocks of w (N rows of K / 32 blocks of the problem's type, row after row) that the op's fill
// draws from w's operand seed `seed`, edge cases included where the problem has them.
std::vector<std::uint8_t> gemv_gguf_draw_blocks(const Problem& problem, std::uint64_t seed);

// For the negative control only: rung 01 scaling each block with the d (and m for q4_1) of the next
// block of its row of w, the row's last block with its first's (a block index off by one, as the
// int4 GEMV's Int4Flaw::next_group_scales; a row of one block reads its own). The check must fail
// it. Defined in quant/01_gemv_gguf_warp_per_column.cu beside gemv_gguf_01_swapped_nibbles.
void gemv_gguf_01_next_block_scales(const GgufGemvArgs& args, cudaStream_t stream);

}  // namespace kc::stage3
