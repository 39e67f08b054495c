// The gemv_int4 op (kc/stage3/gemv_int4.hpp): the host quantizer, dequantizer and prepare, the
// operands, the host reference and the problems.
#include "kc/stage3/gemv_int4.hpp"

#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/op_builder.hpp"
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

}  // namespace

std::vector<double> dequantize_int4_groups(const Int4GroupWeights& w) {
  check_int4_group_weights(w, "dequantize_int4_groups");
  const int groups = w.k / w.group_size;
  std::vector<double> out(static_cast<std::size_t>(w.n) * static_cast<std::size_t>(w.k));
  for (int row = 0; row < w.n; ++row)
    for (int kk = 0; kk < w.k; ++kk) {
      const std::uint8_t byte = w.qweight[static_cast<std::size_t>(row) * static_cast<std::size_t>(w.k / 2) +
                                          static_cast<std::size_t>(kk / 2)];
      const int q = kk % 2 == 0 ? byte & 15 : byte >> 4;
      const std::size_t entry = static_cast<std::size_t>(row) * static_cast<std::size_t>(groups) +
                                static_cast<std::size_t>(kk / w.group_size);
      out[static_cast<std::size_t>(row) * static_cast<std::size_t>(w.k) + static_cast<std::size_t>(kk)] =
          half_value(w.scales[entry]) * static_cast<double>(q - static_cast<int>(w.zeros[entry]));
    }
  return out;
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

int gemv_int4_group_size(const Problem& problem) {
  const double g = problem.param("group_size");
  require(g >= 1.0 && g <= 1048576.0 && g == std::floor(g), "gemv_int4: group_size {} is not a positive whole number",
          g);
  return static_cast<int>(g);
}

std::string int4_group_size_error(const Problem& p, std::int64_t k) {
  const double g = p.param("group_size");
  if (!(g >= 1.0 && g <= 1048576.0 && g == std::floor(g)) || !int4_group_size_supported(static_cast<int>(g)))
    return fmt::format("group_size must be 32, 64 or a multiple of 128 (got {})", g);
  if (k % static_cast<std::int64_t>(g) != 0)
    return fmt::format("group_size {} must divide K = {} (a group may not straddle the end of a row)", g, k);
  return "";
}

std::string gemv_int4_shape_error(const Problem& p) {
  if (std::string error = int4_group_size_error(p, p.dims[2]); !error.empty()) return error;
  if (p.dims[0] > kInt4BatchMaxRows)
    return fmt::format("M must be at most {} (a batch of decode steps; more rows are a GEMM's work)",
                       kInt4BatchMaxRows);
  return "";
}

std::string gemv_int4_rows_error(const Problem& p, int max_rows) {
  if (std::string error = gemv_int4_shape_error(p); !error.empty()) return error;
  if (p.dims[0] > max_rows)
    return fmt::format("this rung takes at most {} rows of x (a decode step); rung 03 takes up to {}", max_rows,
                       kInt4BatchMaxRows);
  return "";
}

std::vector<std::string> gemv_int4_refusals(int max_rows) {
  std::vector<std::string> labels;
  for (const Problem& problem : make_gemv_int4_op().conformance_problems)
    if (!gemv_int4_rows_error(problem, max_rows).empty()) labels.push_back(problem.label());
  return labels;
}

namespace {

// build_op seeds operand i of a run with `run * 16 + i` (op_builder.cpp). The stored weight is
// operands 1-3; the prepared operands recover their seeds from their own and draw them again.
constexpr std::uint64_t kOperandSeedsPerRun = 16;
constexpr std::uint64_t kQweightOperand = 1, kScalesOperand = 2, kZerosOperand = 3;

std::uint64_t seed_of(std::uint64_t operand_seed, std::uint64_t operand) {
  return operand_seed / kOperandSeedsPerRun * kOperandSeedsPerRun + operand;
}

int dim(const Problem& p, int i) { return static_cast<int>(p.dims[static_cast<std::size_t>(i)]); }
int groups_per_row(const Problem& p) { return dim(p, 2) / gemv_int4_group_size(p); }

std::vector<std::uint8_t> draw_qweight(const Problem& p, std::uint64_t seed) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(dim(p, 1)) * static_cast<std::size_t>(dim(p, 2) / 2));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::uint8_t& b : out) b = static_cast<std::uint8_t>(byte(rng));
  return out;
}

// Positive scales: normal halves in [2^-10, 2^-4], one group in 32 of scale 0 and one in 32 a
// subnormal half (below 2^-14).
std::vector<std::uint16_t> draw_scales(const Problem& p, std::uint64_t seed) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(dim(p, 1)) * static_cast<std::size_t>(groups_per_row(p)));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_scale(-10.0, -4.0), log_subnormal(-24.0, -15.0);
  std::uniform_int_distribution<int> kind(0, 31);
  for (std::uint16_t& bits : out) {
    const int k = kind(rng);
    const double value = k == 0 ? 0.0 : k == 1 ? std::exp2(log_subnormal(rng)) : std::exp2(log_scale(rng));
    const __half h = __float2half_rn(static_cast<float>(value));
    std::memcpy(&bits, &h, sizeof bits);
  }
  return out;
}

std::vector<std::uint8_t> draw_zeros(const Problem& p, std::uint64_t seed) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(dim(p, 1)) * static_cast<std::size_t>(groups_per_row(p)));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> zero(0, 15);
  for (std::uint8_t& z : out) z = static_cast<std::uint8_t>(zero(rng));
  return out;
}

Int4GroupHost draw_weight(const Problem& p, std::uint64_t operand_seed) {
  Int4GroupHost w;
  w.n = dim(p, 1);
  w.k = dim(p, 2);
  w.group_size = gemv_int4_group_size(p);
  w.qweight = draw_qweight(p, seed_of(operand_seed, kQweightOperand));
  w.scales = draw_scales(p, seed_of(operand_seed, kScalesOperand));
  w.zeros = draw_zeros(p, seed_of(operand_seed, kZerosOperand));
  return w;
}

template <typename T>
void upload(Tensor& tensor, const std::vector<T>& values, cudaStream_t stream) {
  tensor.upload(values.data(), values.size() * sizeof(T), stream);
}

Shape qweight_shape(const Problem& p) { return Shape{p.dims[1], p.dims[2] / 2}; }
Shape group_shape(const Problem& p) { return Shape{p.dims[1], groups_per_row(p)}; }
// The prepared operands as bytes, one row a tile-chunk.
Shape quants_shape(const Problem& p) {
  return Shape{static_cast<std::int64_t>(int4_tile_chunks(dim(p, 1), dim(p, 2))), 32 * 32};
}
Shape group_scales_shape(const Problem& p) {
  return Shape{static_cast<std::int64_t>(int4_tile_chunks(dim(p, 1), dim(p, 2))),
               kInt4TileRows * int4_groups_per_chunk(gemv_int4_group_size(p)) * 4};
}

double prepared_bytes(const Problem& p) {
  const int n = dim(p, 1), k = dim(p, 2);
  return static_cast<double>(int4_prepared_quant_bytes(n, k) + int4_prepared_scale_bytes(n, k, gemv_int4_group_size(p)));
}

}  // namespace

Int4GemvArgs gemv_int4_args(const Problem& p, Operands& o) {
  Int4GemvArgs args;
  args.m = dim(p, 0);
  args.n = dim(p, 1);
  args.k = dim(p, 2);
  args.group_size = gemv_int4_group_size(p);
  args.x = o["x"].data<__nv_bfloat16>();
  args.quants = reinterpret_cast<const std::uint8_t*>(o["w_quants"].raw());
  args.scales = reinterpret_cast<const std::uint32_t*>(o["w_group_scales"].raw());
  args.y = o["y"].data<__nv_bfloat16>();
  return args;
}

OpSpec make_gemv_int4_op() {
  OpConfig op;
  op.name = kGemvInt4Op;
  op.description =
      "y = x.w^T, x [M,K] (M <= 64) and y [M,N] bf16, w [N,K] 4-bit in groups of G along K with a half scale and a "
      "4-bit zero point each (GPTQ/AWQ: w = s (q - z)), prepared once for mma.sync's fragments, FP32 accumulation";
  op.dim_names = {"M", "N", "K"};
  op.dtypes = {DType::bf16};
  op.params = {{"group_size", 128.0, "G, the weights along K that share a scale and a zero point: 32, 64 or a multiple "
                                     "of 128 that divides K"}};
  op.bound = Bound::memory;
  op.math = MathUnit::fp16_tensor;  // the rungs multiply on the tensor cores: their peak bounds a plausible time
  OperandSpec qweight = input("w_qweight", &qweight_shape, FillSpec{}, DType::i8);
  qweight.initialize = [](const Problem& p, Tensor& t, std::uint64_t seed, cudaStream_t s) {
    upload(t, draw_qweight(p, seed), s);
  };
  OperandSpec scales = input("w_scales", &group_shape, FillSpec{}, DType::f16);
  scales.initialize = [](const Problem& p, Tensor& t, std::uint64_t seed, cudaStream_t s) {
    upload(t, draw_scales(p, seed), s);
  };
  OperandSpec zeros = input("w_zeros", &group_shape, FillSpec{}, DType::i8);
  zeros.initialize = [](const Problem& p, Tensor& t, std::uint64_t seed, cudaStream_t s) {
    upload(t, draw_zeros(p, seed), s);
  };
  OperandSpec quants = input("w_quants", &quants_shape, FillSpec{}, DType::i8);
  quants.initialize = [](const Problem& p, Tensor& t, std::uint64_t seed, cudaStream_t s) {
    upload(t, prepare_int4_groups(draw_weight(p, seed).view()).quants, s);
  };
  OperandSpec group_scales = input("w_group_scales", &group_scales_shape, FillSpec{}, DType::i8);
  group_scales.initialize = [](const Problem& p, Tensor& t, std::uint64_t seed, cudaStream_t s) {
    upload(t, prepare_int4_groups(draw_weight(p, seed).view()).scales, s);
  };
  // The stored operands stay operands kQweightOperand..kZerosOperand: the prepared ones draw them again.
  op.operands = {input("x", dims_at({0, 2})), qweight, scales, zeros, quants, group_scales, output("y", dims_at({0, 1}))};
  op.host_reference = [](const Problem& p, const HostTensors& in) {
    const int m_rows = dim(p, 0), n_cols = dim(p, 1), k_len = dim(p, 2);
    Int4GroupHost w;
    w.n = n_cols;
    w.k = k_len;
    w.group_size = gemv_int4_group_size(p);
    const std::vector<double>& q = in.at("w_qweight");
    const std::vector<double>& s = in.at("w_scales");
    const std::vector<double>& z = in.at("w_zeros");
    w.qweight.resize(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) w.qweight[i] = static_cast<std::uint8_t>(static_cast<int>(q[i]) & 0xff);
    w.scales.resize(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      const __half h = __double2half(s[i]);  // exact: s holds half values
      std::memcpy(&w.scales[i], &h, sizeof h);
    }
    w.zeros.resize(z.size());
    for (std::size_t i = 0; i < z.size(); ++i) w.zeros[i] = static_cast<std::uint8_t>(static_cast<int>(z[i]) & 0xff);
    const std::vector<double> weights = dequantize_int4_groups(w.view());
    std::vector<double> y(static_cast<std::size_t>(m_rows) * static_cast<std::size_t>(n_cols));
    gemm_reference(GemmShape{m_rows, n_cols, k_len}, 1.0, in.at("x").data(), weights.data(), BLayout::n_by_k, 0.0,
                   nullptr, y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  op.accuracy = [](const Problem& p, const std::string&, DType output_dtype) {
    Accuracy accuracy;
    accuracy.output = output_dtype;
    accuracy.terms = static_cast<double>(p.dims[2]);
    return accuracy;
  };
  op.flops = [](const Problem& p) { return 2.0 * static_cast<double>(p.dims[0] * p.dims[1] * p.dims[2]); };
  op.bytes = [](const Problem& p) {
    return static_cast<double>(p.dims[0] * p.dims[2] * 2 + p.dims[0] * p.dims[1] * 2) + prepared_bytes(p);
  };
  op.supports = &gemv_int4_shape_error;
  // Decode steps of Llama-3-8B's projections (4096 -> 4096, 4096 -> 14336, 14336 -> 4096) at M = 1
  // and G = 128, the first at M = 16, and at G = 32, 64 and K (one scale a row).
  using P = ParamValues;
  for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4096, 4096}, {14336, 4096}, {4096, 14336}})
    op.bench.push_back({{1, n, k}});
  op.bench.push_back({{16, 4096, 4096}});
  for (const double g : {32.0, 64.0, 4096.0}) op.bench.push_back({{1, 4096, 4096}, std::nullopt, P{{"group_size", g}}});
  // Batches of decode steps (rung 03): 32 and 64 rows on the 4096 x 4096 weight, 16 and 64 on the
  // 8B's up (14336 x 4096) and down (4096 x 14336), at G = 128; 64 rows at G = 32.
  for (const std::int64_t m : {32, 64}) op.bench.push_back({{m, 4096, 4096}});
  for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{{14336, 4096}, {4096, 14336}})
    for (const std::int64_t m : {16, 64}) op.bench.push_back({{m, n, k}});
  op.bench.push_back({{64, 4096, 4096}, std::nullopt, P{{"group_size", 32.0}}});
  // Odd N and M, K of one group and of many, a K that is not a whole number of chunks (G of 32 and
  // 64), groups spanning several chunks (256, and G = K).
  const std::vector<std::pair<double, std::vector<Shape>>> conformance = {
      {32.0, {{1, 1, 32}, {3, 37, 96}, {16, 257, 576}, {7, 100, 1024}}},
      {64.0, {{1, 17, 64}, {9, 40, 576}, {4, 100, 1024}}},
      {128.0, {{1, 1, 128}, {5, 33, 384}, {16, 257, 1024}, {2, 100, 4096}}},
      {256.0, {{3, 40, 512}, {1, 16, 768}}},
      {1152.0, {{2, 24, 1152}}},
      // More than 16 rows (rung 03; rungs 01 and 02 refuse them): a partial last token tile, K
      // long enough for several splits, every token tile count's neighbourhood.
      {32.0, {{17, 40, 160}, {64, 300, 2080}}},
      {64.0, {{24, 100, 1152}}},
      {128.0, {{33, 129, 4224}, {57, 16, 1024}}},
      {256.0, {{40, 260, 2048}}},
  };
  for (const auto& [g, shapes] : conformance)
    for (const Shape& dims : shapes) op.conformance.push_back({dims, std::nullopt, P{{"group_size", g}}});
  op.copy_scratch = std::make_shared<CopyScratch>();
  return build_op(std::move(op));
}

}  // namespace kc::stage3
