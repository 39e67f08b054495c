// kc/stage3/int4_groups.hpp — 4-bit weights in groups with scales and zero points (the form of
// kc/stage3/gemv_int4_args.hpp) on the host: the stored form, the host quantizer and dequantizer,
// the prepare into the GEMV's layout, and the reader of GPTQ and AWQ checkpoint tensors.
//
// Host C++ only, no kernels and nothing of the harness: the library kc_stage3_int4_groups, which
// the engine's model loader links to read GPTQ/AWQ checkpoints as well as kc_stage3 (the gemv_int4
// and quantize_int4 ops, kc/stage3/gemv_int4.hpp, use it for their references and operands).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/stage3/gemv_int4_args.hpp"

namespace kc::stage3 {

// A weight's stored form on the host (the arrays behind an Int4GroupWeights).
struct Int4GroupHost {
  int n = 0, k = 0, group_size = 128;
  std::vector<std::uint8_t> qweight;  // [N, K / 2]
  std::vector<std::uint16_t> scales;  // [N, K / G] IEEE half bits
  std::vector<std::uint8_t> zeros;    // [N, K / G]
  Int4GroupWeights view() const;
};

// Round-to-nearest quantization of an N x K float weight (row-major) into groups of `group_size`,
// GPTQ's min-max rule without its error feedback, in float (the arithmetic of
// kc/stage3/quantize_int4_args.hpp, which the GPU rungs share): per row and group, lo = min(0, min
// w) and hi = max(0, max w); s = (hi - lo) / 15 rounded to a half; z = rint(-lo / s) clamped to
// 0..15; q = rint(w / s) + z clamped to 0..15, rint rounding half to even. A group of zeros gets s
// = 0, z = 8, q = 8 (it dequantizes to zeros). kc::Error, naming the row and k, for a NaN or
// infinite weight or a group whose range overflows a half scale (|hi - lo| / 15 > 65504); nothing
// is returned half-way.
Int4GroupHost quantize_int4_groups_on_host(const float* w, int n, int k, int group_size);

// The same, marking the groups the other refuses (s = NaN half 0x7E00, z = 0, every q = 0) as the
// GPU rungs do: the quantize_int4 op's reference.
Int4GroupHost quantize_int4_groups_reference(const float* w, int n, int k, int group_size);

// Every weight of the stored form in double, row-major [N, K]: s (q - z). The op's reference.
std::vector<double> dequantize_int4_groups(const Int4GroupWeights& w);
// The same in float, exactly the same values (a half times an integer of at most 5 bits fits a
// float's 24-bit significand): what a model loader rounds to its compute dtype.
std::vector<float> dequantize_int4_groups_to_float(const Int4GroupWeights& w);

// The prepared layout written on the host (check_int4_group_weights first; a zero point above 15
// is refused with its row and group): what prepare_int4_groups_on_device writes too.
struct Int4Prepared {
  std::vector<std::uint8_t> quants;   // int4_prepared_quant_bytes(n, k)
  std::vector<std::uint32_t> scales;  // int4_prepared_scale_bytes(n, k, G) / 4 entries
};
Int4Prepared prepare_int4_groups(const Int4GroupWeights& w);

// The checkpoint formats that carry these weights, as their safetensors hold a linear layer of
// in_features K and out_features N (int32 words little-endian, scales IEEE half):
//   gptq_v1, gptq_v2  qweight [K / 8, N]: nibble i (bits 4i) of word (r, n) is q of k = 8r + i;
//                     qzeros [K / G, N / 8]: nibble i of word (u, j) is the zero point of column
//                     8j + i — stored minus one in v1 (the original GPTQ packing; a stored 15 means
//                     16), as it is in v2; scales [K / G, N]; g_idx [K] (may be null): group of k
//   awq               qweight [K, N / 8] and qzeros [K / G, N / 8], packed along N in AWQ's order:
//                     nibble i of word (r, j) is column 8j + (0, 2, 4, 6, 1, 3, 5, 7)[i]; scales
//                     [K / G, N]; no g_idx
// In every one w[n][k] = scale (q - zero), the form of kc/stage3/gemv_int4_args.hpp.
enum class Int4CheckpointFormat { gptq_v1, gptq_v2, awq };

// "gptq_v1", "gptq_v2", "awq".
const char* int4_checkpoint_format_name(Int4CheckpointFormat format);

// One checkpoint layer's tensors (host memory).
struct Int4CheckpointTensors {
  const std::int32_t* qweight = nullptr;
  const std::int32_t* qzeros = nullptr;
  const std::uint16_t* scales = nullptr;  // IEEE half bits
  const std::int32_t* g_idx = nullptr;    // GPTQ only; null: groups of consecutive k
  int k = 0;                              // in_features
  int n = 0;                              // out_features
  int group_size = 128;
};

// The layer in this format's stored form, transposed to [N, K] rows. kc::Error naming `layer` and
// the rule for what the form cannot hold, with nothing returned half-way: N not a multiple of 8
// (the zero points are packed 8 columns a word), K not a multiple of 8 (GPTQ) or of the group
// size, a group size the GEMV does not take, a g_idx that is not k / G for every k (GPTQ's
// act-order, desc_act: groups that are not runs of consecutive k — re-quantize without it, or
// permute K and x to match), and a GPTQ v1 zero point of 16 (a stored 15). A symmetric GPTQ
// checkpoint gives zero points of 8 everywhere.
Int4GroupHost int4_groups_from_checkpoint(Int4CheckpointFormat format, const Int4CheckpointTensors& tensors,
                                          const std::string& layer);

}  // namespace kc::stage3
