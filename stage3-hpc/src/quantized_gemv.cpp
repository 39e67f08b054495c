// The public quantized GEMV entry (kc/stage3/quantized_gemv.hpp): the checks, then rung 01.
#include "kc/stage3/quantized_gemv.hpp"

#include <fmt/format.h>

#include "arch/util.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {

std::string_view quantized_gemv_kernel_name(QuantizedGemvKernel kernel) {
  switch (kernel) {
    case QuantizedGemvKernel::gemv_gguf_01_warp_per_column:
      return "stage3/gemv_gguf/01_warp_per_column";
  }
  return "unknown";
}

std::string_view gguf_block_type_name(GgufBlockType type) {
  switch (type) {
    case GgufBlockType::q4_0:
      return "q4_0";
    case GgufBlockType::q4_1:
      return "q4_1";
    case GgufBlockType::q8_0:
      return "q8_0";
  }
  return "unknown";
}

void check_quantized_gemv_args(const QuantizedGemvArgs& a) {
  constexpr const char* entry = "kc::stage3::quantized_gemv";
  require(a.type == GgufBlockType::q4_0 || a.type == GgufBlockType::q4_1 || a.type == GgufBlockType::q8_0,
          "{}: block type {} is not q4_0 (2), q4_1 (3) or q8_0 (8), the GGUF blocks the GEMV reads; other "
          "types run dequantized to bf16 through kc::stage3::Gemm",
          entry, static_cast<int>(a.type));
  require(a.m >= 1 && a.m <= kGgufGemvMaxRows,
          "{}: M = {} is outside [1, {}]: the GEMV takes the rows of a decode step; run more rows as a GEMM "
          "(kc::stage3::Gemm on the dequantized weight)",
          entry, a.m, kGgufGemvMaxRows);
  require(a.n >= 1, "{}: N = {} must be at least 1 (skip the call for an empty output)", entry, a.n);
  require(a.k >= kGgufBlockWeights && a.k % kGgufBlockWeights == 0,
          "{}: K = {} is not a positive multiple of {}: a row of w is whole blocks of {} weights", entry, a.k,
          kGgufBlockWeights, kGgufBlockWeights);
  require(a.w != nullptr, "{}: w (the N x K / 32 blocks) is a null pointer", entry);
  require(a.x != nullptr, "{}: x (M x K, bf16) is a null pointer", entry);
  require(a.y != nullptr, "{}: y (M x N, bf16) is a null pointer", entry);
  require(aligned(a.w, 4), "{}: w at {} is not 4-byte aligned: the rung reads the blocks' halves in place",
          entry, static_cast<const void*>(a.w));
  require(aligned(a.x, 4), "{}: x at {} is not 4-byte aligned: the rung reads x in bf16 pairs", entry,
          static_cast<const void*>(a.x));
  require(aligned(a.y, 2), "{}: y at {} is not aligned to a bf16 element (2 bytes)", entry,
          static_cast<const void*>(a.y));
}

QuantizedGemvKernel quantized_gemv(const QuantizedGemvArgs& args, cudaStream_t stream) {
  check_quantized_gemv_args(args);
  gemv_gguf_01_warp_per_column(args, stream);
  return QuantizedGemvKernel::gemv_gguf_01_warp_per_column;
}

}  // namespace kc::stage3
