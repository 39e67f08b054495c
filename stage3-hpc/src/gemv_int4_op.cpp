// The gemv_int4 op (kc/stage3/gemv_int4.hpp): the operands, the host reference and the problems
// (the host quantizer, dequantizer and prepare are kc/stage3/int4_groups.hpp's).
#include "kc/stage3/gemv_int4.hpp"

#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cmath>
#include <cstddef>
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
#include "src/gemv_int4_edges.hpp"
#include "src/weight_only_gemv_edges.hpp"

namespace kc::stage3 {

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
// subnormal half (below 2^-14); then, in the problems with edge cases, the NaN groups of
// weight_only_gemv_nan_scales (src/weight_only_gemv_edges.hpp), from the edge cases' generator.
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
  if (!weight_only_gemv_has_edge_cases(p)) return out;
  std::mt19937_64 edges = weight_only_gemv_edge_generator(seed);
  for (const std::int64_t group : weight_only_gemv_nan_scales(p, groups_per_row(p), edges))
    out[static_cast<std::size_t>(group)] = kHalfNanBits;
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

std::vector<std::uint16_t> gemv_int4_draw_scales(const Problem& problem, std::uint64_t seed) {
  return draw_scales(problem, seed);
}

Int4GroupHost gemv_int4_draw_weight(const Problem& problem, std::uint64_t operand_seed) {
  return draw_weight(problem, operand_seed);
}

HostTensors gemv_int4_host_reference(const Problem& p, const HostTensors& in) {
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
    const __half h = __double2half(s[i]);  // exact: s holds half values (a NaN stays a NaN half)
    std::memcpy(&w.scales[i], &h, sizeof h);
  }
  w.zeros.resize(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) w.zeros[i] = static_cast<std::uint8_t>(static_cast<int>(z[i]) & 0xff);
  const std::vector<double> weights = dequantize_int4_groups(w.view());
  std::vector<double> y(static_cast<std::size_t>(m_rows) * static_cast<std::size_t>(n_cols));
  gemm_reference(GemmShape{m_rows, n_cols, k_len}, 1.0, in.at("x").data(), weights.data(), BLayout::n_by_k, 0.0,
                 nullptr, y.data());
  return HostTensors{{"y", std::move(y)}};
}

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
  op.operands = {weight_only_gemv_x(), qweight, scales, zeros, quants, group_scales, output("y", dims_at({0, 1}))};
  op.host_reference = &gemv_int4_host_reference;
  // K products summed in FP32, one rounding to bf16; 2 M N K FLOPs (the reference's work, M N K,
  // matters only to ops with a device reference too).
  set_gemm_accounting(op, [](const Problem& p) { return GemmShape{p.dims[0], p.dims[1], p.dims[2]}; });
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
  // Each holds the NaN scales and the NaN in x of src/gemv_int4_edges.hpp (N K <= 2^22, the
  // largest 300 x 2080); the bench shapes above (N K >= 2^24) hold none.
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
