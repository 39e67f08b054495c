// kc/engine/ggml_types.hpp — the tensor types a GGUF file can hold, as ggml numbers them.
//
// ggml stores a tensor as rows of blocks: `block_elements` values packed into `block_bytes` bytes
// (1 and 4 for f32; 32 and 20 for q4_1; 256 and 210 for q6_K). A row's length (the first
// dimension, ggml's ne[0]) must be a whole number of blocks. The reader needs every type's block
// shape to find where each tensor ends, even for types the engine cannot dequantize
// (dequantize.hpp lists those it can).
#pragma once

#include <cstdint>
#include <string_view>

namespace kc::engine {

// ggml's type ids (enum ggml_type). The gaps are ids whose support ggml removed (4, 5, 31-33,
// 36-38); a file that uses one is rejected as having an unknown type.
enum class GgmlType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_K = 10,
  q3_K = 11,
  q4_K = 12,
  q5_K = 13,
  q6_K = 14,
  q8_K = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;         // as ggml prints it: "f32", "q4_1", "q6_K"
  std::uint32_t block_elements;  // values per block
  std::uint32_t block_bytes;     // bytes per block
};

// The type with ggml id `id`, or nullptr when GGUF defines no such type (or no longer does).
const GgmlTypeInfo* find_ggml_type(std::uint32_t id);
// Facts of a known type.
const GgmlTypeInfo& ggml_type_info(GgmlType type);
std::string_view ggml_type_name(GgmlType type);

// Bytes that `elements` values of `type` take. Throws kc::Error when `elements` is not a whole
// number of blocks or the byte count does not fit in 64 bits.
std::uint64_t ggml_storage_bytes(GgmlType type, std::uint64_t elements);

}  // namespace kc::engine
