// kc/stage3/quantize_gguf.hpp — bf16 rows to llama.cpp's GGUF blocks (q4_0, q4_1, q8_0): the
// quantize_gguf op, its host reference and the public entry stage 4 calls. What is computed, the
// output layout and what NaN, Inf, zeros and subnormals become: kc/stage3/quantize_gguf_args.hpp.
//
// Problem dimensions rows, K ("4096x4096"): x [rows, K] bf16 ~ uniform(-1, 1), K a multiple of 32;
// parameter `ggml_type`: 2 (q4_0, the default), 3 (q4_1) or 8 (q8_0), as gemv_gguf's. Output
// `blocks`: the bytes of rows x K / 32 blocks (an i8 tensor [rows, K / 32 x block bytes]), poisoned
// before the run. Reference: ggml's reference quantizers in float on the host
// (quantize_gguf_on_host), or the same function in a GPU kernel for large problems; the bytes must
// match exactly (integer output: tolerance 0). Bytes: x once and the blocks once. Baseline: a copy
// of those bytes (the op is memory-bound; % of baseline is % of copy bandwidth).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/quantize_gguf.hpp, the op's harness side: kernels include quantize_gguf_args.hpp"
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/quantize_gguf_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kQuantizeGgufOp = "quantize_gguf";

// ggml's reference quantizer of `type` (quantize_row_q4_0_ref, _q4_1_ref, _q8_0_ref) over `count`
// floats, block after block, in ggml's order and float arithmetic (kc/stage3/quantize_gguf_args.hpp):
// count / 32 blocks of gguf_block_bytes(type) bytes. kc::Error for a count that is not a multiple
// of 32 or a type other than q4_0, q4_1, q8_0.
std::vector<std::uint8_t> quantize_gguf_on_host(GgufBlockType type, const float* x, std::size_t count);

// The same for the bf16 values `x` (converted exactly to float first): what the op and the rungs
// compute.
std::vector<std::uint8_t> quantize_gguf_on_host(GgufBlockType type, const __nv_bfloat16* x, std::size_t count);

// Throws kc::Error unless `args` describe a call the rungs can run: type q4_0, q4_1 or q8_0; rows
// >= 1; K a positive multiple of 32 (whole blocks); x and out non-null and 16-byte aligned (rows
// are then too: a row is K x 2 bytes). No CUDA call.
void check_quantize_gguf_args(const QuantizeGgufArgs& args);

// The public entry: x [rows, K] bf16 to rows x K / 32 GGUF blocks of args.type at args.out, as
// ggml's reference quantizers write them (the `w` that quantized_gemv reads). Checks its arguments
// first (check_quantize_gguf_args: on bad input nothing runs and nothing is written), then runs
// stage3/quantize_gguf/02_thread_per_block, asynchronously on `stream`; allocates nothing.
void quantize_gguf(const QuantizeGgufArgs& args, cudaStream_t stream);

// "" when the op defines `problem` (ggml_type 2, 3 or 8; K a multiple of 32), otherwise why not.
std::string quantize_gguf_shape_error(const Problem& problem);

// The launch arguments of `problem` on its operands.
QuantizeGgufArgs quantize_gguf_args(const Problem& problem, Operands& operands);

OpSpec make_quantize_gguf_op();

// The labels of the op's conformance problems every rung refuses (K % 32 != 0).
std::vector<std::string> quantize_gguf_refusals();

// Adds the op and its ladder (stage3/quantize_gguf/01_quad_per_block) in the report stage3-quant,
// beside the GGUF GEMV that reads its output.
void register_quantize_gguf_kernels(Registry& registry);

// The device reference: the blocks of x [rows, K] computed by the host reference's function in a
// GPU kernel (a thread per block), written as doubles of the signed bytes (what the comparison
// reads), for problems too large for the host.
void quantize_gguf_reference_on_device(GgufBlockType type, const __nv_bfloat16* x, long long rows, int k,
                                       double* out, cudaStream_t stream);

}  // namespace kc::stage3
