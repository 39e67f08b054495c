#include "kc/engine/ggml_types.hpp"

#include <limits>

#include "kc/common/error.hpp"

namespace kc::engine {

namespace {

// Block shapes from ggml's block structs (ggml-common.h): QK_K = 256 values per super-block,
// 32 per block for the legacy quants, a half-precision scale named d where a type has one.
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::f32, "f32", 1, 4},
    {GgmlType::f16, "f16", 1, 2},
    {GgmlType::q4_0, "q4_0", 32, 18},  // f16 d, 16 bytes of nibbles
    {GgmlType::q4_1, "q4_1", 32, 20},  // f16 d, f16 m, 16 bytes of nibbles
    {GgmlType::q5_0, "q5_0", 32, 22},  // f16 d, 4 bytes of fifth bits, 16 of nibbles
    {GgmlType::q5_1, "q5_1", 32, 24},  // f16 d, f16 m, 4 + 16 bytes
    {GgmlType::q8_0, "q8_0", 32, 34},  // f16 d, 32 int8
    {GgmlType::q8_1, "q8_1", 32, 36},  // f16 d, f16 s, 32 int8
    {GgmlType::q2_K, "q2_K", 256, 84},
    {GgmlType::q3_K, "q3_K", 256, 110},
    {GgmlType::q4_K, "q4_K", 256, 144},
    {GgmlType::q5_K, "q5_K", 256, 176},
    {GgmlType::q6_K, "q6_K", 256, 210},
    {GgmlType::q8_K, "q8_K", 256, 292},
    {GgmlType::iq2_xxs, "iq2_xxs", 256, 66},
    {GgmlType::iq2_xs, "iq2_xs", 256, 74},
    {GgmlType::iq3_xxs, "iq3_xxs", 256, 98},
    {GgmlType::iq1_s, "iq1_s", 256, 50},
    {GgmlType::iq4_nl, "iq4_nl", 32, 18},
    {GgmlType::iq3_s, "iq3_s", 256, 110},
    {GgmlType::iq2_s, "iq2_s", 256, 82},
    {GgmlType::iq4_xs, "iq4_xs", 256, 136},
    {GgmlType::i8, "i8", 1, 1},
    {GgmlType::i16, "i16", 1, 2},
    {GgmlType::i32, "i32", 1, 4},
    {GgmlType::i64, "i64", 1, 8},
    {GgmlType::f64, "f64", 1, 8},
    {GgmlType::iq1_m, "iq1_m", 256, 56},
    {GgmlType::bf16, "bf16", 1, 2},
    {GgmlType::tq1_0, "tq1_0", 256, 54},
    {GgmlType::tq2_0, "tq2_0", 256, 66},
    {GgmlType::mxfp4, "mxfp4", 32, 17},  // one e8m0 scale byte, 16 bytes of fp4 pairs
};

}  // namespace

const GgmlTypeInfo* find_ggml_type(std::uint32_t id) {
  for (const GgmlTypeInfo& info : kTypes)
    if (static_cast<std::uint32_t>(info.type) == id) return &info;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  const GgmlTypeInfo* info = find_ggml_type(static_cast<std::uint32_t>(type));
  require(info != nullptr, "ggml type id {} is not one GGUF defines",
          static_cast<std::uint32_t>(type));
  return *info;
}

std::string_view ggml_type_name(GgmlType type) { return ggml_type_info(type).name; }

std::uint64_t ggml_storage_bytes(GgmlType type, std::uint64_t elements) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  require(elements % info.block_elements == 0,
          "{} values of type {} are not a whole number of its {}-value blocks", elements, info.name,
          info.block_elements);
  const std::uint64_t blocks = elements / info.block_elements;
  require(blocks <= std::numeric_limits<std::uint64_t>::max() / info.block_bytes,
          "{} values of type {} take more than 2^64 bytes", elements, info.name);
  return blocks * info.block_bytes;
}

}  // namespace kc::engine
