// 4-bit groups on the host (kc/stage3/int4_groups.hpp): the argument checks of
// kc/stage3/gemv_int4_args.hpp, the quantizer, the dequantizer, the prepare and the checkpoint
// reader. Host C++ only (the library kc_stage3_int4_groups).
#include "kc/stage3/int4_groups.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/quantize_int4_args.hpp"

namespace kc::stage3 {

Int4GroupWeights Int4GroupHost::view() const {
  Int4GroupWeights w;
  w.qweight = qweight.data();
  w.scales = scales.data();
  w.zeros = zeros.data();
  w.n = n;
  w.k = k;
  w.group_size = group_size;
  return w;
}

void check_int4_group_shape(long long rows, long long k, int group_size, const char* who) {
  require(rows >= 1 && k >= 1, "{}: N = {} (rows) and K = {} must be at least 1", who, rows, k);
  require(int4_group_size_supported(group_size),
          "{}: group size {} is not 32, 64 or a multiple of 128 (the prepared layout's chunks are 128 weights)", who,
          group_size);
  require(k % group_size == 0,
          "{}: group size {} does not divide K = {} (a group may not straddle the end of a row; quantize with a "
          "group size that divides K, e.g. {})",
          who, group_size, k, k % 64 == 0 ? 64 : 32);
}

void check_int4_group_weights(const Int4GroupWeights& w, const char* who) {
  check_int4_group_shape(w.n, w.k, w.group_size, who);
  require(w.qweight != nullptr && w.scales != nullptr && w.zeros != nullptr,
          "{}: qweight, scales and zeros must be non-null", who);
}

namespace {

// The quantizer of kc/stage3/quantize_int4_args.hpp over an N x K float weight; a group it cannot
// hold is refused (kc::Error naming it) when `refuse_invalid`, marked (s = NaN, z = 0, q = 0)
// otherwise.
Int4GroupHost quantize_groups(const float* w, int n, int k, int group_size, bool refuse_invalid, const char* who) {
  Int4GroupHost out;
  out.n = n;
  out.k = k;
  out.group_size = group_size;
  check_int4_group_shape(n, k, group_size, who);
  require(w != nullptr, "{}: w must be non-null", who);
  const int groups = k / group_size;
  out.qweight.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(k / 2), 0);  // K is even: a multiple of G
  out.scales.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(groups));
  out.zeros.resize(out.scales.size());
  for (int row = 0; row < n; ++row)
    for (int u = 0; u < groups; ++u) {
      const float* values = w + static_cast<std::size_t>(row) * static_cast<std::size_t>(k) +
                            static_cast<std::size_t>(u) * static_cast<std::size_t>(group_size);
      float lo = 0.f, hi = 0.f;
      bool finite = true;
      for (int i = 0; i < group_size; ++i) {
        if (!std::isfinite(values[i])) {
          require(!refuse_invalid, "{}: weight [{}, {}] is {} (not finite)", who, row, u * group_size + i, values[i]);
          finite = false;
        }
        lo = std::fmin(lo, values[i]);
        hi = std::fmax(hi, values[i]);
      }
      std::uint16_t scale_bits = kInt4InvalidScaleBits;
      float scale = 0.f;
      int zero = 0;
      const bool valid = finite && int4_group_scale(lo, hi, scale_bits, scale, zero);
      require(valid || !refuse_invalid, "{}: the group of row {} from k = {} spans [{}, {}], past a half scale's range",
              who, row, u * group_size, lo, hi);
      if (!valid) {
        scale_bits = kInt4InvalidScaleBits;
        zero = 0;
      }
      const std::size_t entry = static_cast<std::size_t>(row) * static_cast<std::size_t>(groups) +
                                static_cast<std::size_t>(u);
      out.scales[entry] = scale_bits;
      out.zeros[entry] = static_cast<std::uint8_t>(zero);
      for (int i = 0; i < group_size; ++i) {
        const int q = valid ? int4_quantize_value(values[i], scale, zero) : 0;
        const std::size_t kk = static_cast<std::size_t>(u) * static_cast<std::size_t>(group_size) +
                               static_cast<std::size_t>(i);
        std::uint8_t& byte = out.qweight[static_cast<std::size_t>(row) * static_cast<std::size_t>(k / 2) + kk / 2];
        byte = static_cast<std::uint8_t>(kk % 2 == 0 ? (byte & 0xf0) | q : (byte & 0x0f) | (q << 4));
      }
    }
  return out;
}

}  // namespace

Int4GroupHost quantize_int4_groups_on_host(const float* w, int n, int k, int group_size) {
  return quantize_groups(w, n, k, group_size, true, "quantize_int4_groups_on_host");
}

Int4GroupHost quantize_int4_groups_reference(const float* w, int n, int k, int group_size) {
  return quantize_groups(w, n, k, group_size, false, "quantize_int4_groups_reference");
}

namespace {

double half_value(std::uint16_t bits) {
  return decode_element(reinterpret_cast<const std::byte*>(&bits), DType::f16, 0);
}

// s (q - z) for every weight, row-major [N, K], in T (double or float: the same values).
template <typename T>
std::vector<T> dequantize_groups(const Int4GroupWeights& w, const char* who) {
  check_int4_group_weights(w, who);
  const int groups = w.k / w.group_size;
  std::vector<T> scales(static_cast<std::size_t>(w.n) * static_cast<std::size_t>(groups));
  for (std::size_t e = 0; e < scales.size(); ++e) scales[e] = static_cast<T>(half_value(w.scales[e]));
  std::vector<T> out(static_cast<std::size_t>(w.n) * static_cast<std::size_t>(w.k));
  for (int row = 0; row < w.n; ++row)
    for (int kk = 0; kk < w.k; ++kk) {
      const std::uint8_t byte = w.qweight[static_cast<std::size_t>(row) * static_cast<std::size_t>(w.k / 2) +
                                          static_cast<std::size_t>(kk / 2)];
      const int q = kk % 2 == 0 ? byte & 15 : byte >> 4;
      const std::size_t entry = static_cast<std::size_t>(row) * static_cast<std::size_t>(groups) +
                                static_cast<std::size_t>(kk / w.group_size);
      out[static_cast<std::size_t>(row) * static_cast<std::size_t>(w.k) + static_cast<std::size_t>(kk)] =
          scales[entry] * static_cast<T>(q - static_cast<int>(w.zeros[entry]));
    }
  return out;
}

}  // namespace

std::vector<double> dequantize_int4_groups(const Int4GroupWeights& w) {
  return dequantize_groups<double>(w, "dequantize_int4_groups");
}

std::vector<float> dequantize_int4_groups_to_float(const Int4GroupWeights& w) {
  return dequantize_groups<float>(w, "dequantize_int4_groups_to_float");
}

Int4Prepared prepare_int4_groups(const Int4GroupWeights& w) {
  check_int4_group_weights(w, "prepare_int4_groups");
  const std::size_t entries = static_cast<std::size_t>(w.n) * static_cast<std::size_t>(w.k / w.group_size);
  for (std::size_t e = 0; e < entries; ++e)
    require(w.zeros[e] <= 15, "prepare_int4_groups: the zero point of row {}, group {} is {}, not a 4-bit value",
            e / static_cast<std::size_t>(w.k / w.group_size), e % static_cast<std::size_t>(w.k / w.group_size),
            static_cast<int>(w.zeros[e]));
  Int4Prepared out;
  out.quants.resize(int4_prepared_quant_bytes(w.n, w.k));
  out.scales.resize(int4_prepared_scale_bytes(w.n, w.k, w.group_size) / 4);
  const std::size_t tile_chunks = int4_tile_chunks(w.n, w.k);
  for (std::size_t tile_chunk = 0; tile_chunk < tile_chunks; ++tile_chunk)
    for (int lane = 0; lane < 32; ++lane)
      prepare_int4_group_lane(w, tile_chunk, lane, out.quants.data(), out.scales.data());
  return out;
}

const char* int4_checkpoint_format_name(Int4CheckpointFormat format) {
  switch (format) {
    case Int4CheckpointFormat::gptq_v1: return "gptq_v1";
    case Int4CheckpointFormat::gptq_v2: return "gptq_v2";
    case Int4CheckpointFormat::awq: return "awq";
  }
  return "unknown";
}

Int4GroupHost int4_groups_from_checkpoint(Int4CheckpointFormat format, const Int4CheckpointTensors& t,
                                          const std::string& layer) {
  const char* name = int4_checkpoint_format_name(format);
  const bool gptq = format != Int4CheckpointFormat::awq;
  require(t.qweight != nullptr && t.qzeros != nullptr && t.scales != nullptr,
          "{} ({}): qweight, qzeros and scales must all be present", layer, name);
  require(t.k >= 1 && t.n >= 1 && t.n % 8 == 0,
          "{} ({}): out_features N = {} must be a positive multiple of 8 (zero points are packed 8 columns a word)",
          layer, name, t.n);
  require(!gptq || t.k % 8 == 0, "{} ({}): in_features K = {} must be a multiple of 8 (qweight packs 8 k a word)",
          layer, name, t.k);
  check_int4_group_shape(t.n, t.k, t.group_size, fmt::format("{} ({})", layer, name).c_str());
  require(gptq || t.g_idx == nullptr, "{} (awq): AWQ checkpoints have no g_idx", layer);
  if (t.g_idx != nullptr)
    for (int kk = 0; kk < t.k; ++kk)
      require(t.g_idx[kk] == kk / t.group_size,
              "{} ({}): g_idx[{}] is {}, not {}: the checkpoint was quantized with act-order (desc_act), whose "
              "groups are not runs of consecutive k; this format needs them consecutive (re-quantize without "
              "act-order, or permute K and x to match)",
              layer, name, kk, t.g_idx[kk], kk / t.group_size);
  const int groups = t.k / t.group_size;
  const auto word_nibble = [](std::int32_t word, int i) {
    return static_cast<int>((static_cast<std::uint32_t>(word) >> (4 * i)) & 15u);
  };
  // AWQ's order: nibble i of a word holds column 8j + kAwqOrder[i].
  static constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const auto packed_along_n = [&](const std::int32_t* words, int row, int column) {
    const std::int32_t word = words[static_cast<std::size_t>(row) * static_cast<std::size_t>(t.n / 8) +
                                    static_cast<std::size_t>(column / 8)];
    if (gptq) return word_nibble(word, column % 8);
    for (int i = 0; i < 8; ++i)
      if (kAwqOrder[i] == column % 8) return word_nibble(word, i);
    return 0;
  };
  Int4GroupHost out;
  out.n = t.n;
  out.k = t.k;
  out.group_size = t.group_size;
  out.qweight.assign(static_cast<std::size_t>(t.n) * static_cast<std::size_t>(t.k / 2), 0);
  out.scales.resize(static_cast<std::size_t>(t.n) * static_cast<std::size_t>(groups));
  out.zeros.resize(out.scales.size());
  for (int u = 0; u < groups; ++u)
    for (int column = 0; column < t.n; ++column) {
      int zero = packed_along_n(t.qzeros, u, column);
      if (format == Int4CheckpointFormat::gptq_v1) ++zero;
      require(zero <= 15,
              "{} (gptq_v1): the zero point of column {}, group {} is 16 (stored as 15: GPTQ v1 keeps zero points "
              "minus one), past the 4 bits this format holds",
              layer, column, u);
      const std::size_t entry = static_cast<std::size_t>(column) * static_cast<std::size_t>(groups) +
                                static_cast<std::size_t>(u);
      out.zeros[entry] = static_cast<std::uint8_t>(zero);
      out.scales[entry] = t.scales[static_cast<std::size_t>(u) * static_cast<std::size_t>(t.n) +
                                   static_cast<std::size_t>(column)];
    }
  for (int kk = 0; kk < t.k; ++kk)
    for (int column = 0; column < t.n; ++column) {
      const int q = gptq ? word_nibble(t.qweight[static_cast<std::size_t>(kk / 8) * static_cast<std::size_t>(t.n) +
                                                 static_cast<std::size_t>(column)],
                                       kk % 8)
                         : packed_along_n(t.qweight, kk, column);
      std::uint8_t& byte = out.qweight[static_cast<std::size_t>(column) * static_cast<std::size_t>(t.k / 2) +
                                       static_cast<std::size_t>(kk / 2)];
      byte = static_cast<std::uint8_t>(kk % 2 == 0 ? (byte & 0xf0) | q : (byte & 0x0f) | (q << 4));
    }
  return out;
}

}  // namespace kc::stage3
