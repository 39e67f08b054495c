// kc/stage3/gemv_gguf.hpp — the gemv_gguf op: weight-only quantized GEMV on llama.cpp's GGUF
// block formats (q4_0, q4_1, q8_0), read as a GGUF file stores them. What it computes and the
// block layouts: kc/stage3/gemv_gguf_args.hpp.
//
// Problem dimensions M, N, K ("1x4096x4096"): y [M, N] = x [M, K] . w^T with w [N, K] in blocks of
// 32 along K; parameter `ggml_type`: 2 (q4_0, the default), 3 (q4_1) or 8 (q8_0). Operands: x
// bf16 ~ uniform(-1, 1); w the blocks as bytes (an i8 tensor [N, K / 32 x block bytes]): d drawn
// in [2^-10, 2^-4] (a normal half), m for q4_1 of either sign with a magnitude in [2^-10, 2^-2],
// the quants uniform over their range; y bf16. Reference: the blocks decoded on the host (an implementation of its own, not the
// kernels'), then the product in double. Bytes: x, the blocks and y once. Baseline: a copy of
// those bytes (the op is memory-bound; % of baseline is % of copy bandwidth on the packed bytes).
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

// "" when the op defines `problem` (M in [1, 16], K a multiple of 32, ggml_type 2, 3 or 8),
// otherwise why not.
std::string gemv_gguf_shape_error(const Problem& problem);

OpSpec make_gemv_gguf_op();

// The launch arguments of `problem` on its operands (x, w, y).
GgufGemvArgs gemv_gguf_args(const Problem& problem, Operands& operands);

}  // namespace kc::stage3
