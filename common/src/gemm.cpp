#include "kc/common/gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "kc/common/fill.hpp"

namespace kc {

GemmShape gemm_shape(const Problem& problem) {
  require(problem.dims.size() == 3, "a GEMM problem has three dimensions M x N x K, got '{}'",
          problem.shape());
  return {problem.dims[0], problem.dims[1], problem.dims[2]};
}

Problem gemm_problem(std::string op, Shape dims, DType dtype, double alpha, double beta) {
  return make_problem(std::move(op), gemm_params(), std::move(dims), dtype,
                      {{"alpha", alpha}, {"beta", beta}});
}

std::vector<ParamSpec> gemm_params() {
  return {{"alpha", 1.0, "scales A.B"}, {"beta", 0.0, "scales the C read in (C is not read when 0)"}};
}

void gemm_reference(GemmShape s, double alpha, const double* a, const double* b, BLayout b_layout,
                    double beta, const double* c_in, double* c_out) {
  std::vector<double> row(static_cast<std::size_t>(s.n));
  for (std::int64_t i = 0; i < s.m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    const double* a_row = a + i * s.k;
    if (b_layout == BLayout::k_by_n) {
      for (std::int64_t p = 0; p < s.k; ++p) {  // i-k-j order: unit stride over B and C rows
        const double a_ip = a_row[p];
        const double* b_row = b + p * s.n;
        for (std::int64_t j = 0; j < s.n; ++j) row[j] += a_ip * b_row[j];
      }
    } else {
      for (std::int64_t j = 0; j < s.n; ++j) {  // B is N x K: dot products of rows
        const double* b_row = b + j * s.k;
        double sum = 0.0;
        for (std::int64_t p = 0; p < s.k; ++p) sum += a_row[p] * b_row[p];
        row[j] = sum;
      }
    }
    for (std::int64_t j = 0; j < s.n; ++j) {
      const double c = beta == 0.0 ? 0.0 : beta * c_in[i * s.n + j];  // C unread when beta == 0
      c_out[i * s.n + j] = alpha * row[j] + c;
    }
  }
}

std::vector<ProblemSpec> default_gemm_bench_problems() {
  std::vector<ProblemSpec> problems;
  for (std::int64_t n : {256, 512, 1024, 2048, 4096, 8192}) problems.push_back({{n, n, n}});
  problems.push_back({{4093, 2049, 1031}});
  problems.push_back({{8192, 512, 4096}});
  problems.push_back({{128, 8192, 8192}});
  return problems;
}

std::vector<ProblemSpec> default_gemm_conformance_problems() {
  std::vector<ProblemSpec> problems;
  // Every dimension takes each odd size at least once, with M != N != K.
  const std::vector<Shape> shapes = {
      {1, 1, 1},       {1, 17, 127},     {17, 127, 1},     {127, 1, 17},
      {17, 1000, 127}, {1000, 127, 17},  {127, 17, 1000},  {4093, 17, 127},
      {17, 4093, 1000}, {127, 1000, 4093}, {1000, 4093, 1}, {1, 1000, 4093},
      {4093, 1, 1000}, {129, 65, 257},   {31, 33, 35},
      // tile multiples, where fast paths live
      {64, 64, 64},    {128, 256, 64},   {256, 128, 512}, {1024, 1024, 1024},
  };
  for (const Shape& dims : shapes) problems.push_back({dims});
  // alpha and beta: beta != 0 reads C; the NaN-poisoned C must be ignored when beta == 0.
  problems.push_back({{127, 129, 131}, std::nullopt, {{"alpha", 1.5}}});
  problems.push_back({{127, 129, 131}, std::nullopt, {{"beta", 1.0}}});
  problems.push_back({{1000, 1000, 100}, std::nullopt, {{"alpha", -0.5}, {"beta", 0.25}}});
  problems.push_back({{256, 256, 256}, std::nullopt, {{"alpha", 2.0}, {"beta", -1.0}}});
  return problems;
}

namespace {

Shape b_shape(GemmShape s, BLayout layout) {
  return layout == BLayout::k_by_n ? Shape{s.k, s.n} : Shape{s.n, s.k};
}

// cuBLAS in FP64 on the GPU: the reference of problems too large for the CPU.
References gemm_device_reference(BLayout b_layout, const Problem& problem, const Operands& operands,
                                 Context& context) {
  const GemmShape s = gemm_shape(problem);
  const Tensor& a = operands["A"];
  const Tensor& b = operands["B"];
  const Tensor& c = operands["C"];
  const cudaStream_t stream = context.stream();
  const double beta = problem.param("beta");
  DeviceBuffer<double> a64(a.count()), b64(b.count()), c64(c.count());
  convert_to_double(a.raw(), a.dtype, a.count(), a64.data(), stream);
  convert_to_double(b.raw(), b.dtype, b.count(), b64.data(), stream);
  if (beta != 0.0) convert_to_double(c.raw(), c.dtype, c.count(), c64.data(), stream);
  cublas_dgemm(context.cublas(), stream, s, problem.param("alpha"), a64.data(), b64.data(), b_layout,
               beta, c64.data());
  References references;
  references.emplace("C", std::move(c64));
  return references;
}

}  // namespace

OpConfig gemm_op_config(const GemmOpConfig& config) {
  require(!config.name.empty(), "a GEMM op needs a name");
  require(!config.dtypes.empty(), "GEMM op '{}' must name its dtypes", config.name);
  for (DType t : config.dtypes)
    require(t == DType::f32 || t == DType::f16 || t == DType::bf16,
            "GEMM op '{}': {} is not supported (f32, f16, bf16)", config.name, dtype_name(t));
  const BLayout layout = config.b_layout;

  OpConfig op;
  op.name = config.name;
  std::string types;
  for (DType t : config.dtypes) types += (types.empty() ? "" : " or ") + std::string(dtype_name(t));
  op.description = fmt::format("C = alpha.A.B + beta.C, row-major, A, B and C {}, {}, FP32 accumulation",
                               types, b_layout_name(layout));
  op.dim_names = {"M", "N", "K"};
  op.dtypes = config.dtypes;
  op.params = gemm_params();
  op.bound = Bound::compute;
  op.math = config.math;

  const auto beta_is_set = [](const Problem& p) { return p.param("beta") != 0.0; };
  OperandSpec c = input("C", dims_at({0, 1}));
  c.role = Role::input_output;
  c.is_read = beta_is_set;
  op.operands = {input("A", dims_at({0, 2})),
                 input("B", [layout](const Problem& p) { return b_shape(gemm_shape(p), layout); }), c};

  op.host_reference = [layout](const Problem& p, const HostTensors& in) {
    const GemmShape s = gemm_shape(p);
    std::vector<double> result(static_cast<std::size_t>(s.m * s.n));
    const double beta = p.param("beta");
    gemm_reference(s, p.param("alpha"), in.at("A").data(), in.at("B").data(), layout, beta,
                   beta != 0.0 ? in.at("C").data() : nullptr, result.data());
    return HostTensors{{"C", std::move(result)}};
  };
  op.device_reference = [layout](const Problem& p, const Operands& o, Context& context) {
    return gemm_device_reference(layout, p, o, context);
  };
  op.reference_work = [](const Problem& p) {
    const GemmShape s = gemm_shape(p);
    return static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  };
  // Each element sums K products in FP32 and is rounded to C's type: once when beta == 0; with
  // beta != 0 BLAS promises no fused rounding, and cuBLAS does round alpha.A.B before adding
  // beta.C (seen on the H200 in bf16: results one ulp off a single rounding), so two.
  op.accuracy = [](const Problem& p, const std::string&, DType output) {
    Accuracy accuracy;
    accuracy.output = output;
    accuracy.terms = static_cast<double>(gemm_shape(p).k);
    accuracy.roundings = p.param("beta") != 0.0 ? 2 : 1;
    return accuracy;
  };
  op.flops = [](const Problem& p) {
    const GemmShape s = gemm_shape(p);
    return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  };
  op.supports = [](const Problem& p) { return gemm_index_limit_error(gemm_shape(p), p.shape()); };
  op.bench = config.bench.empty() ? default_gemm_bench_problems() : config.bench;
  op.conformance = config.conformance.empty() ? default_gemm_conformance_problems() : config.conformance;

  const bool fp32_only = config.dtypes.size() == 1 && config.dtypes[0] == DType::f32;
  op.baseline_name = fp32_only ? "cuBLAS SGEMM (FP32, pedantic)"
                               : fmt::format("cuBLAS GemmEx ({}, FP32 accumulation and reductions)", types);
  op.baseline = [layout](const Problem& p, Operands& o, Context& context) {
    const auto alpha = static_cast<float>(p.param("alpha"));
    const auto beta = static_cast<float>(p.param("beta"));
    if (p.dtype == DType::f32)
      cublas_sgemm(context.cublas(), context.stream(), gemm_shape(p), alpha, o["A"].data<float>(),
                   o["B"].data<float>(), layout, beta, o["C"].data<float>());
    else
      cublas_gemm_ex(context.cublas(), context.stream(), gemm_shape(p), p.dtype, p.dtype, alpha,
                     o["A"].raw(), o["B"].raw(), layout, beta, o["C"].raw());
  };
  // What a caller gets without asking: default math (SGEMM: FP32 still, any of cuBLAS's
  // kernels; GemmEx: split-K partials may be reduced in the output type). Timed beside the
  // baseline, and checked: where the default rounds partials to 16 bits the check says so.
  op.peers.push_back(
      {fp32_only ? "cuBLAS SGEMM (default math)" : "cuBLAS GemmEx (default math: reductions may round to 16 bits)",
       [layout](const Problem& p, Operands& o, Context& context) {
         const auto alpha = static_cast<float>(p.param("alpha"));
         const auto beta = static_cast<float>(p.param("beta"));
         if (p.dtype == DType::f32)
           cublas_sgemm(context.cublas(), context.stream(), gemm_shape(p), alpha, o["A"].data<float>(),
                        o["B"].data<float>(), layout, beta, o["C"].data<float>(), SgemmMath::default_math);
         else
           cublas_gemm_ex(context.cublas(), context.stream(), gemm_shape(p), p.dtype, p.dtype, alpha,
                          o["A"].raw(), o["B"].raw(), layout, beta, o["C"].raw(), {},
                          GemmReductions::library_default);
       }});
  return op;
}

OpSpec make_gemm_op(const GemmOpConfig& config) { return build_op(gemm_op_config(config)); }

std::string gemm_index_limit_error(GemmShape s, std::string_view what) {
  constexpr std::int64_t limit = INT32_MAX;
  if (s.m * s.k > limit || s.k * s.n > limit || s.m * s.n > limit)
    return fmt::format("{}: a matrix with more than 2^31 - 1 elements does not fit the 32-bit indexing kc kernels use",
                       what);
  return {};
}

void set_gemm_accounting(OpConfig& op, std::function<GemmShape(const Problem&)> shape_of) {
  const auto multiply_adds = [shape_of](const Problem& p) {
    const GemmShape s = shape_of(p);
    return static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  };
  op.reference_work = multiply_adds;
  op.accuracy = [shape_of](const Problem& p, const std::string&, DType output) {
    Accuracy accuracy;
    accuracy.output = output;
    accuracy.terms = static_cast<double>(shape_of(p).k);
    return accuracy;
  };
  op.flops = [multiply_adds](const Problem& p) { return 2.0 * multiply_adds(p); };
}

}  // namespace kc
