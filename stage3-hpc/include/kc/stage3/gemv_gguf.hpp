// kc/stage3/gemv_gguf.hpp — the gemv_gguf op: weight-only quantized GEMV on llama.cpp's GGUF
// block formats (q4_0, q4_1, q8_0), read as a GGUF file stores them. What it computes and the
// block layouts: kc/stage3/gemv_gguf_args.hpp.
//
// Problem dimensions M, N, K ("1x4096x4096"): y [M, N] = x [M, K] . w^T with w [N, K] in blocks of
// 32 along K; parameter `ggml_type`: 2 (q4_0, the default), 3 (q4_1) or 8 (q8_0); parameter
// `layout`: 0 (the default) the blocks as the file stores them, 1 the blocks repacked at load time
// by repack_gguf_blocks(), 2 the blocks repacked for mma.sync's fragments by
// repack_gguf_blocks_for_mma(), 3 the same with the weights as the A operand by
// repack_gguf_blocks_for_mma16() (the layouts: gemv_gguf_args.hpp). Each rung reads one layout and
// refuses the other. Operands: x bf16 ~ uniform(-1, 1); w the blocks as bytes (an i8 tensor
// [N, K / 32 x block bytes]), at both layouts: d of either sign with a magnitude in [2^-10, 2^-4] (a
// normal half; llama.cpp writes negative q4_0 scales), m for q4_1
// of either sign with a magnitude in [2^-10, 2^-2], the quants uniform over their range (in the
// conformance problems, N K <= 2^22, also zero, subnormal and a few NaN scales, and x one NaN:
// src/gemv_gguf_edges.hpp);
// w_quants (i8) and w_scales (f16) the repack of those same blocks at layout=1 (allocated and
// poisoned at layout=0, where nothing may read them); y bf16. Reference: the blocks of w decoded
// on the host (an implementation of its own, not the kernels', and never the repack's output),
// then the product in double. Bytes: x, the weights and y once — the repacked weights are exactly
// as many bytes as the blocks. Baseline: a copy of those bytes (the op is memory-bound; % of
// baseline is % of copy bandwidth on the packed bytes).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/gemv_gguf.hpp, the op's harness side: kernels include gemv_gguf_args.hpp"
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kGemvGgufOp = "gemv_gguf";

// The block type a problem asks for (kc::Error for a ggml_type other than 2, 3 or 8).
GgufBlockType gguf_block_type(const Problem& problem);

// The 32 weights of each block of `bytes` (whole blocks of `type`), decoded on the host in double:
// the op's reference decode, tested on hand-built blocks.
std::vector<double> decode_gguf_blocks(GgufBlockType type, const std::uint8_t* bytes, std::size_t blocks);

// The same blocks with their quants and scales apart (the layout=1 of gemv_gguf_args.hpp), what an
// inference engine computes once when it loads a GGUF tensor: `bytes` holds whole blocks of
// `type`, row after row; kc::Error for a byte count that is not a whole number of blocks.
struct GgufRepacked {
  std::vector<std::uint8_t> quants;  // gguf_quant_bytes(type) a block
  std::vector<std::uint8_t> scales;  // gguf_scale_bytes(type) a block: half d, or half2 (d, m)
};
GgufRepacked repack_gguf_blocks(GgufBlockType type, const std::uint8_t* bytes, std::size_t byte_count);

// The same blocks in the fragment layout of rung 03 (layout=2 of gemv_gguf_args.hpp): `bytes`
// holds the N rows of K / 32 blocks of `type`; the result is padded to whole tiles of 8 rows x 4
// blocks with zeros. kc::Error for a byte count that is not N x K / 32 blocks. The GPU version
// (repack_gguf_blocks_for_mma_on_device) writes the same bytes.
GgufRepacked repack_gguf_blocks_for_mma(GgufBlockType type, const std::uint8_t* bytes, std::size_t byte_count,
                                        int n, int k);
// The same for rung 05's layout (layout=3: tiles of 16 rows, the weights as mma's A operand).
GgufRepacked repack_gguf_blocks_for_mma16(GgufBlockType type, const std::uint8_t* bytes, std::size_t byte_count,
                                          int n, int k);
// The layout a problem asks for (kc::Error for a layout other than 0, 1, 2 or 3).
GgufLayout gguf_layout(const Problem& problem);

// "" when the op defines `problem` (M in [1, 64], K a multiple of 32, ggml_type 2, 3 or 8, layout
// 0 to 3), otherwise why not.
std::string gemv_gguf_shape_error(const Problem& problem);

// "" when a rung that reads `layout` and takes up to `max_rows` rows of x runs `problem` (the op
// defines it, M <= max_rows, and it asks for that layout), otherwise why not; and the labels of the
// op's conformance problems such a rung refuses (every one of another layout or with more rows).
std::string gemv_gguf_layout_error(const Problem& problem, GgufLayout layout, int max_rows = kGgufGemvMaxRows);
std::vector<std::string> gemv_gguf_refusals(GgufLayout layout, int max_rows = kGgufGemvMaxRows);

OpSpec make_gemv_gguf_op();

// The launch arguments of `problem` on its operands: x, y, and w (layout=0) or w_quants and
// w_scales (layout=1).
GgufGemvArgs gemv_gguf_args(const Problem& problem, Operands& operands);

}  // namespace kc::stage3
