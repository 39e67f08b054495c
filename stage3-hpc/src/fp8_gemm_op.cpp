// The fp8_gemm op (kc/stage3/fp8_gemm.hpp): its operands, references, problems and the cuBLASLt
// baseline.
#include "kc/stage3/fp8_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <utility>

#include "kc/common/blas.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/core/vector_io.hpp"
#include "src/fp8_gemm_edges.hpp"

namespace kc::stage3 {

// The device half of the reference (src/gemm_references.cu): values[r][c] *= scales[map(r, c)] for
// a rows x cols matrix of doubles in device memory.
void fp8_dequantize_reference(double* values, std::int64_t rows, std::int64_t cols, const float* scales,
                              Fp8ScaleMap map, cudaStream_t stream);

namespace {

std::int64_t m_of(const Problem& p) { return p.dims[0]; }
std::int64_t n_of(const Problem& p) { return p.dims[1]; }
std::int64_t k_of(const Problem& p) { return p.dims[2]; }
Fp8Scaling scaling_of(const Problem& p) {
  return p.param("scaling") == 1.0 ? Fp8Scaling::block : Fp8Scaling::per_tensor;
}

Shape scale_a_shape(const Problem& p) {
  if (scaling_of(p) == Fp8Scaling::per_tensor) return {1};
  return {fp8_k_blocks(static_cast<int>(k_of(p))), m_of(p)};
}
Shape scale_b_shape(const Problem& p) {
  if (scaling_of(p) == Fp8Scaling::per_tensor) return {1};
  return {fp8_n_blocks(static_cast<int>(n_of(p))), fp8_k_blocks(static_cast<int>(k_of(p)))};
}

// A or B: the plain uniform draw, then with edges one element NaN (poison's e4m3 NaN, 0x7F).
OperandSpec fp8_operand(const char* name, ShapeFn shape, bool of_a) {
  OperandSpec operand = input(name, std::move(shape));
  const FillSpec fill = operand.fill;
  operand.initialize = [fill, of_a](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    fill_random(tensor.raw(), tensor.dtype, tensor.count(), seed, fill, stream);
    if (const auto element = fp8_gemm_nan_element(p, of_a)) {
      const std::size_t index = static_cast<std::size_t>(element->first * k_of(p) + element->second);
      poison(static_cast<std::byte*>(tensor.raw()) + index, tensor.dtype, 1, stream);  // one byte an element
    }
  };
  return operand;
}

// s_A or s_B: uniform in [0.25, 4], or the edge cases' scales.
OperandSpec fp8_scales(const char* name, ShapeFn shape, bool of_a) {
  const FillSpec fill = FillSpec::uniform(0.25, 4.0);
  OperandSpec operand = input(name, std::move(shape), fill, DType::f32);
  operand.initialize = [fill, of_a](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    if (fp8_gemm_edges(p) == Fp8GemmEdges::none) {
      fill_random(tensor.raw(), tensor.dtype, tensor.count(), seed, fill, stream);
      return;
    }
    const std::vector<float> scales = fp8_gemm_edge_scales(p, of_a, seed);
    tensor.upload(scales.data(), scales.size() * sizeof(float), stream);
  };
  return operand;
}

// rows x cols values times their scales, on the host.
std::vector<double> dequantized(const std::vector<double>& values, std::int64_t rows, std::int64_t cols,
                                const std::vector<double>& scales, Fp8ScaleMap map) {
  std::vector<double> out(values.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      out[i] = values[i] * scales[static_cast<std::size_t>(map(r, c))];
    }
  return out;
}

HostTensors host_reference(const Problem& p, const HostTensors& in) {
  const std::int64_t m = m_of(p), n = n_of(p), k = k_of(p);
  const Fp8Scaling scaling = scaling_of(p);
  const std::vector<double> a =
      dequantized(in.at("A"), m, k, in.at("scale_a"), fp8_scale_map_a(scaling, static_cast<int>(m)));
  const std::vector<double> b =
      dequantized(in.at("B"), n, k, in.at("scale_b"), fp8_scale_map_b(scaling, static_cast<int>(k)));
  std::vector<double> c(static_cast<std::size_t>(m * n));
  gemm_reference({m, n, k}, 1.0, a.data(), b.data(), BLayout::n_by_k, 0.0, nullptr, c.data());
  return HostTensors{{"C", std::move(c)}};
}

// The dequantized operands in double on the GPU, then cuBLAS DGEMM.
References device_reference(const Problem& p, const Operands& o, Context& context) {
  const std::int64_t m = m_of(p), n = n_of(p), k = k_of(p);
  const Fp8Scaling scaling = scaling_of(p);
  const cudaStream_t stream = context.stream();
  const Tensor& a = o["A"];
  const Tensor& b = o["B"];
  DeviceBuffer<double> a64(a.count()), b64(b.count()), c64(o["C"].count());
  convert_to_double(a.raw(), a.dtype, a.count(), a64.data(), stream);
  convert_to_double(b.raw(), b.dtype, b.count(), b64.data(), stream);
  fp8_dequantize_reference(a64.data(), m, k, o["scale_a"].data<float>(), fp8_scale_map_a(scaling, static_cast<int>(m)),
                           stream);
  fp8_dequantize_reference(b64.data(), n, k, o["scale_b"].data<float>(), fp8_scale_map_b(scaling, static_cast<int>(k)),
                           stream);
  cublas_dgemm(context.cublas(), stream, {m, n, k}, 1.0, a64.data(), b64.data(), BLayout::n_by_k, 0.0, c64.data());
  References references;
  references.emplace("C", std::move(c64));
  return references;
}

// cuBLASLt plans, one per shape and scaling, made on first use (in the untimed warm-up launches,
// or when baseline_supports asks whether cuBLASLt runs the problem). Block scaling runs cuBLASLt's
// block modes on the scales as the op stores them: 1 x 128 pieces for A, 128 x 128 blocks for B.
class Fp8LtPlans {
 public:
  const CublasLtGemm& get(cublasLtHandle_t handle, const Problem& p) {
    const Fp8Scaling scaling = scaling_of(p);
    const auto key = std::make_tuple(m_of(p), n_of(p), k_of(p), static_cast<int>(scaling));
    auto found = plans_.find(key);
    if (found == plans_.end()) {
      const LtScaling lt = scaling == Fp8Scaling::block ? LtScaling::blocks_128x128 : LtScaling::per_tensor;
      found = plans_
                  .emplace(key, std::make_unique<CublasLtGemm>(handle, GemmShape{m_of(p), n_of(p), k_of(p)},
                                                               DType::f8e4m3, DType::bf16, BLayout::n_by_k,
                                                               LtEpilogue::none, std::size_t{32} << 20, lt))
                  .first;
    }
    return *found->second;
  }

  void run(Context& context, const Problem& p, Operands& o) {
    const Fp8GemmArgs args = fp8_gemm_args(p, o);
    get(context.cublaslt(), p).run(1.f, args.a, args.b, 0.f, args.c, context.stream(), nullptr, args.scale_a,
                                   args.scale_b);
  }

 private:
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, std::unique_ptr<CublasLtGemm>> plans_;
};

std::string cublaslt_refusal(Fp8LtPlans& plans, const Problem& p, Context& context) {
  if (k_of(p) % kFp8KMultiple != 0)
    return fmt::format("cuBLASLt's FP8 matmul needs K % {} == 0 (16-byte rows), got K = {}", kFp8KMultiple, k_of(p));
  if (scaling_of(p) == Fp8Scaling::block && (m_of(p) % 4 != 0 || n_of(p) % 4 != 0))
    return fmt::format(
        "cuBLASLt's 1x128 scales are read in 16-byte columns of [ceil(K/128), rows]: M % 4 == 0 and N % 4 == 0 "
        "(got M = {}, N = {})",
        m_of(p), n_of(p));
  try {
    plans.get(context.cublaslt(), p);
  } catch (const Error& e) {
    return fmt::format("cuBLASLt does not run it: {}", e.what());
  }
  return {};
}

}  // namespace

Fp8GemmEdges fp8_gemm_edges(const Problem& p) { return static_cast<Fp8GemmEdges>(static_cast<int>(p.param("edges"))); }

std::optional<std::pair<std::int64_t, std::int64_t>> fp8_gemm_nan_element(const Problem& p, bool of_a) {
  const std::int64_t rows = of_a ? m_of(p) : n_of(p);
  if (fp8_gemm_edges(p) == Fp8GemmEdges::none || rows < 2) return std::nullopt;
  return std::make_pair(rows / 2, of_a ? k_of(p) / 2 : k_of(p) / 3);
}

std::vector<float> fp8_gemm_edge_scales(const Problem& p, bool of_a, std::uint64_t seed) {
  const Fp8GemmEdges edges = fp8_gemm_edges(p);
  const Shape shape = of_a ? scale_a_shape(p) : scale_b_shape(p);
  std::size_t count = 1;
  for (const std::int64_t d : shape) count *= static_cast<std::size_t>(d);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> plain(0.25f, 4.0f), mantissa(1.0f, 2.0f);
  std::vector<float> scales(count);
  for (float& s : scales) s = plain(random);
  if (edges == Fp8GemmEdges::zero_scale_b) {
    if (!of_a) std::fill(scales.begin(), scales.end(), 0.0f);
    return scales;
  }
  if (edges != Fp8GemmEdges::small_scales) return scales;
  if (scaling_of(p) == Fp8Scaling::per_tensor) {
    if (of_a) scales[0] = std::ldexp(1.5f, -130);
    return scales;
  }
  const std::size_t period = of_a ? 7 : 5, zero_at = of_a ? 3 : 2, subnormal_at = of_a ? 5 : 4;
  const int exponent = of_a ? -128 : -127;
  for (std::size_t i = 0; i < count; ++i) {
    if (i % period == zero_at) scales[i] = 0.0f;
    if (i % period == subnormal_at) scales[i] = std::ldexp(mantissa(random), exponent);
  }
  return scales;
}

std::string fp8_gemm_problem_error(const Problem& p) {
  const double scaling = p.param("scaling");
  if (scaling != 0.0 && scaling != 1.0)
    return fmt::format("scaling must be 0 (per tensor) or 1 (1x128 / 128x128 blocks), got {:g}", scaling);
  const double edges = p.param("edges");
  if (edges != 0.0 && edges != 1.0 && edges != 2.0)
    return fmt::format("edges must be 0 (plain draws), 1 (NaN elements, zero and subnormal scales) or 2 (NaN "
                       "elements, s_B zero), got {:g}",
                       edges);
  return gemm_index_limit_error({m_of(p), n_of(p), k_of(p)}, p.shape());
}

std::string fp8_k_multiple_error(std::int64_t k) {
  if (k % kFp8KMultiple == 0) return {};
  return fmt::format(
      "K must be a multiple of {} (got {}): TMA moves rows of A and B in 16-byte pieces, which must start "
      "16-byte aligned",
      kFp8KMultiple, k);
}

std::string fp8_gemm_rung_shape_error(const Problem& p) {
  if (std::string error = fp8_gemm_problem_error(p); !error.empty()) return error;
  return fp8_k_multiple_error(k_of(p));
}

const std::vector<std::string>& fp8_gemm_rung_refusals() {
  static const std::vector<std::string> refusals = {"64x64x100 f8e4m3", "33x17x8 f8e4m3 scaling=1"};
  return refusals;
}

Fp8GemmArgs fp8_gemm_args(const Problem& p, Operands& o) {
  Fp8GemmArgs args;
  args.m = static_cast<int>(m_of(p));
  args.n = static_cast<int>(n_of(p));
  args.k = static_cast<int>(k_of(p));
  args.a = o["A"].data<fp8e4m3>();
  args.b = o["B"].data<fp8e4m3>();
  args.c = o["C"].data<bf16>();
  args.scaling = scaling_of(p);
  args.scale_a = o["scale_a"].data<float>();
  args.scale_b = o["scale_b"].data<float>();
  return args;
}

OpSpec make_fp8_gemm_op() {
  OpConfig op;
  op.name = kFp8GemmOp;
  op.description =
      "C = (A.s_A)(B.s_B)^T: A [M,K] and B [N,K] FP8 e4m3, C [M,N] bf16, FP32 accumulation; scaling=0 one scale "
      "per tensor, scaling=1 per 1x128 piece of A's rows and per 128x128 block of B";
  op.dim_names = {"M", "N", "K"};
  op.dtypes = {DType::f8e4m3};
  op.params = {{"scaling", 0.0, "0: a scale per tensor; 1: per 1x128 piece of A's rows and 128x128 block of B"},
               {"edges", 0.0,
                "0: plain draws; 1: a NaN in A and in B, zero and subnormal scales; 2: a NaN in A and in B, s_B "
                "zero (src/fp8_gemm_edges.hpp)"}};
  op.bound = Bound::compute;
  op.math = MathUnit::fp8_tensor;
  op.operands = {fp8_operand("A", dims_at({0, 2}), true), fp8_operand("B", dims_at({1, 2}), false),
                 fp8_scales("scale_a", &scale_a_shape, true), fp8_scales("scale_b", &scale_b_shape, false),
                 output("C", dims_at({0, 1}), DType::bf16)};
  op.host_reference = &host_reference;
  op.device_reference = &device_reference;
  // Products of e4m3 values are exact in FP32: a bf16 GEMM's tolerance, K terms, one rounding.
  set_gemm_accounting(op, [](const Problem& p) { return GemmShape{m_of(p), n_of(p), k_of(p)}; });
  op.supports = &fp8_gemm_problem_error;

  using P = ParamValues;
  // The squares the targets name, and Llama-3-8B's MLP at 8192 tokens (up/gate, then down), each
  // with a scale per tensor and with block scales.
  for (const double scaling : {0.0, 1.0})
    for (const Shape& dims : std::vector<Shape>{{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 14336, 4096},
                                                {8192, 4096, 14336}})
      op.bench.push_back({dims, std::nullopt, P{{"scaling", scaling}}});
  // Smaller than a tile, edges in M and N, N odd (scalar stores), K tails of 16 inside a
  // 128-deep step, whole tiles, several persistent waves, and K = 8192 (long sums: where a kernel
  // that never promotes its partial sums to FP32 shows). Each with both scalings; two refused (K
  // not a multiple of 16).
  for (const double scaling : {0.0, 1.0}) {
    for (const Shape& dims : std::vector<Shape>{{1, 1, 16}, {17, 1, 32}, {1, 257, 144}, {65, 129, 272},
                                                {127, 255, 1040}, {200, 300, 400}, {128, 128, 128},
                                                {256, 384, 512}, {1000, 17, 656}, {4093, 1000, 1024},
                                                {300, 2049, 2064}, {256, 256, 8192}})
      op.conformance.push_back({dims, std::nullopt, P{{"scaling", scaling}}});
  }
  // The edge cases (src/fp8_gemm_edges.hpp): NaN elements, zero and subnormal scales, s_B zero.
  for (const double scaling : {0.0, 1.0}) {
    for (const Shape& dims : std::vector<Shape>{{65, 129, 272}, {128, 128, 128}, {1000, 17, 656}, {256, 256, 8192}})
      op.conformance.push_back({dims, std::nullopt, P{{"scaling", scaling}, {"edges", 1.0}}});
    op.conformance.push_back({{200, 300, 400}, std::nullopt, P{{"scaling", scaling}, {"edges", 2.0}}});
  }
  op.conformance.push_back({{64, 64, 100}, std::nullopt, P{}});
  op.conformance.push_back({{33, 17, 8}, std::nullopt, P{{"scaling", 1.0}}});

  auto plans = std::make_shared<Fp8LtPlans>();
  op.baseline_name = "cuBLASLt FP8 matmul (e4m3 -> bf16, FP32 accumulation, the same scales)";
  op.baseline = [plans](const Problem& p, Operands& o, Context& context) { plans->run(context, p, o); };
  op.baseline_supports = [plans](const Problem& p, Context& context) { return cublaslt_refusal(*plans, p, context); };
  return build_op(std::move(op));
}

void check_fp8_gemm_args(const Fp8GemmArgs& args) {
  require(args.m >= 1 && args.n >= 1 && args.k >= 1, "FP8 GEMM: empty problem {}x{}x{}", args.m, args.n, args.k);
  require(args.k % kFp8KMultiple == 0,
          "FP8 GEMM: K must be a multiple of {} (got {}): TMA moves rows of A and B in 16-byte pieces",
          kFp8KMultiple, args.k);
  require(args.a != nullptr && args.b != nullptr && args.c != nullptr, "FP8 GEMM: A, B and C must not be null");
  require(core::is_aligned(args.a, 16) && core::is_aligned(args.b, 16),
          "FP8 GEMM: A and B must start 16-byte aligned (TMA reads their rows in 16-byte pieces)");
  require(core::is_aligned(args.c, 16), "FP8 GEMM: C must start 16-byte aligned (TMA stores and paired bf16 stores)");
  require(args.scale_a != nullptr && args.scale_b != nullptr, "FP8 GEMM: both scales are needed");
}

void check_fp8_quantize_args(const Fp8QuantizeArgs& args) {
  require(args.m >= 1 && args.k >= 1, "FP8 quantize: empty problem {} x {}", args.m, args.k);
  require(args.k % kFp8KMultiple == 0, "FP8 quantize: K must be a multiple of {} (got {}): 16-byte loads of x",
          kFp8KMultiple, args.k);
  require(static_cast<long long>(args.m) * args.k <= 2147483647LL,
          "FP8 quantize: {} x {} is more than 2^31 - 1 values (the kernels index in 32 bits)", args.m, args.k);
  require(args.x != nullptr && args.q != nullptr && args.scales != nullptr,
          "FP8 quantize: x, q and scales must not be null");
  require(core::is_aligned(args.x, 16) && core::is_aligned(args.q, 8) && core::is_aligned(args.scales, 4),
          "FP8 quantize: x must start 16-byte aligned, q 8-byte and scales 4-byte (16-byte loads of x, 8-byte "
          "stores of q)");
}

}  // namespace kc::stage3
