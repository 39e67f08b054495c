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

std::vector<Problem> default_gemm_bench_problems(const std::string& op) {
  std::vector<Problem> problems;
  for (std::int64_t n : {256, 512, 1024, 2048, 4096, 8192}) problems.push_back({op, {n, n, n}});
  problems.push_back({op, {4093, 2049, 1031}});
  problems.push_back({op, {8192, 512, 4096}});
  problems.push_back({op, {128, 8192, 8192}});
  return problems;
}

std::vector<Problem> default_gemm_conformance_problems(const std::string& op) {
  std::vector<Problem> problems;
  // Every dimension takes each odd size at least once, with M != N != K.
  const std::vector<std::vector<std::int64_t>> shapes = {
      {1, 1, 1},       {1, 17, 127},     {17, 127, 1},     {127, 1, 17},
      {17, 1000, 127}, {1000, 127, 17},  {127, 17, 1000},  {4093, 17, 127},
      {17, 4093, 1000}, {127, 1000, 4093}, {1000, 4093, 1}, {1, 1000, 4093},
      {4093, 1, 1000}, {129, 65, 257},   {31, 33, 35},
      // tile multiples, where fast paths live
      {64, 64, 64},    {128, 256, 64},   {256, 128, 512}, {1024, 1024, 1024},
  };
  for (const auto& dims : shapes) problems.push_back({op, dims});
  // alpha and beta: beta != 0 reads C; the NaN-poisoned C must be ignored when beta == 0.
  problems.push_back({op, {127, 129, 131}, 1.5, 0.0});
  problems.push_back({op, {127, 129, 131}, 1.0, 1.0});
  problems.push_back({op, {1000, 1000, 100}, -0.5, 0.25});
  problems.push_back({op, {256, 256, 256}, 2.0, -1.0});
  return problems;
}

namespace {

std::vector<std::int64_t> b_shape(GemmShape s, BLayout layout) {
  return layout == BLayout::k_by_n ? std::vector<std::int64_t>{s.k, s.n}
                                   : std::vector<std::int64_t>{s.n, s.k};
}

std::map<std::string, std::vector<double>> gemm_reference_values(const GemmOpConfig& config,
                                                                 const Problem& problem,
                                                                 const Operands& operands,
                                                                 Context& context) {
  const GemmShape s = gemm_shape(problem);
  const Tensor& a = operands["A"];
  const Tensor& b = operands["B"];
  const Tensor& c = operands["C"];
  const cudaStream_t stream = context.stream();
  std::vector<double> result(static_cast<std::size_t>(s.m * s.n));
  if (s.m * s.n * s.k <= context.cpu_reference_limit) {
    const std::vector<double> host_a = to_host_double(a.raw(), a.dtype, a.count(), stream);
    const std::vector<double> host_b = to_host_double(b.raw(), b.dtype, b.count(), stream);
    std::vector<double> host_c;
    if (problem.beta != 0.0) host_c = to_host_double(c.raw(), c.dtype, c.count(), stream);
    gemm_reference(s, problem.alpha, host_a.data(), host_b.data(), config.b_layout, problem.beta,
                   host_c.empty() ? nullptr : host_c.data(), result.data());
    return {{"C", std::move(result)}};
  }
  DeviceBuffer<double> a64(a.count()), b64(b.count()), c64(c.count());
  convert_to_double(a.raw(), a.dtype, a.count(), a64.data(), stream);
  convert_to_double(b.raw(), b.dtype, b.count(), b64.data(), stream);
  if (problem.beta != 0.0) convert_to_double(c.raw(), c.dtype, c.count(), c64.data(), stream);
  cublas_dgemm(context.cublas(), stream, s, problem.alpha, a64.data(), b64.data(), config.b_layout,
               problem.beta, c64.data());
  KC_CUDA_CHECK(cudaMemcpyAsync(result.data(), c64.data(), c64.bytes(), cudaMemcpyDeviceToHost,
                                stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {{"C", std::move(result)}};
}

}  // namespace

OpSpec make_gemm_op(const GemmOpConfig& config) {
  require(!config.name.empty(), "a GEMM op needs a name");
  const bool fp32 = config.ab_type == DType::f32 && config.c_type == DType::f32;
  const bool half = config.ab_type == DType::f16 || config.ab_type == DType::bf16;
  require(fp32 || half, "GEMM op '{}': A/B of {} is not supported (f32, f16, bf16)", config.name,
          dtype_name(config.ab_type));

  OpSpec op;
  op.name = config.name;
  op.description = fmt::format("C = alpha.A.B + beta.C, row-major, A/B {}, C {}, {}, FP32 accumulation",
                               dtype_name(config.ab_type), dtype_name(config.c_type),
                               b_layout_name(config.b_layout));
  op.dim_names = {"M", "N", "K"};
  op.bound = Bound::compute;
  op.math = config.math;
  op.work = [config](const Problem& p) {
    const GemmShape s = gemm_shape(p);
    const double m = static_cast<double>(s.m), n = static_cast<double>(s.n),
                 k = static_cast<double>(s.k);
    Work w;
    w.flops = 2.0 * m * n * k;
    w.bytes = static_cast<double>(dtype_bytes(config.ab_type, 1)) * (m * k + k * n) +
              static_cast<double>(dtype_bytes(config.c_type, 1)) * m * n * (p.beta != 0.0 ? 2 : 1);
    return w;
  };
  op.supports = [](const Problem& p) -> std::string {
    const GemmShape s = gemm_shape(p);
    if (s.m < 1 || s.n < 1 || s.k < 1)
      return fmt::format("GEMM needs M, N, K >= 1 (got {})", p.shape());
    // kc kernels index with 32-bit integers.
    constexpr std::int64_t limit = INT32_MAX;
    if (s.m * s.k > limit || s.k * s.n > limit || s.m * s.n > limit)
      return fmt::format("{}: a matrix with more than 2^31-1 elements does not fit the 32-bit "
                         "indexing kc kernels use", p.shape());
    return {};
  };
  op.make_operands = [config](const Problem& p, std::uint64_t seed, Context& context) {
    const GemmShape s = gemm_shape(p);
    Operands operands;
    const cudaStream_t stream = context.stream();
    Tensor& a = operands.add("A", config.ab_type, {s.m, s.k}, false);
    Tensor& b = operands.add("B", config.ab_type, b_shape(s, config.b_layout), false);
    Tensor& c = operands.add("C", config.c_type, {s.m, s.n}, true);
    fill_random(a.raw(), a.dtype, a.count(), seed * 4 + 0, FillSpec::uniform(-1, 1), stream);
    fill_random(b.raw(), b.dtype, b.count(), seed * 4 + 1, FillSpec::uniform(-1, 1), stream);
    if (p.beta != 0.0)
      fill_random(c.raw(), c.dtype, c.count(), seed * 4 + 2, FillSpec::uniform(-1, 1), stream);
    else
      poison(c.raw(), c.dtype, c.count(), stream);
    return operands;
  };
  op.reference = [config](const Problem& p, const Operands& o, Context& c) {
    return gemm_reference_values(config, p, o, c);
  };
  op.accuracy = [config](const Problem& p, const Tensor&) {
    const GemmShape s = gemm_shape(p);
    // Rounding error of a K-long dot product of O(1) values grows like sqrt(K).
    const double scale =
        std::max(1.0, std::abs(p.alpha) * std::sqrt(static_cast<double>(s.k)) + std::abs(p.beta));
    return Accuracy{tolerance_for(config.precision), scale};
  };
  if (fp32) {
    op.baseline_name = "cuBLAS SGEMM (FP32, pedantic)";
    op.baseline = [config](const Problem& p, Operands& o, Context& context) {
      cublas_sgemm(context.cublas(), context.stream(), gemm_shape(p), static_cast<float>(p.alpha),
                   o["A"].data<float>(), o["B"].data<float>(), config.b_layout,
                   static_cast<float>(p.beta), o["C"].data<float>());
    };
  } else {
    op.baseline_name = fmt::format("cuBLAS GemmEx ({}, FP32 accumulation)", dtype_name(config.ab_type));
    op.baseline = [config](const Problem& p, Operands& o, Context& context) {
      cublas_gemm_ex(context.cublas(), context.stream(), gemm_shape(p), config.ab_type,
                     config.c_type, static_cast<float>(p.alpha), o["A"].raw(), o["B"].raw(),
                     config.b_layout, static_cast<float>(p.beta), o["C"].raw());
    };
  }
  op.bench_problems =
      config.bench_problems.empty() ? default_gemm_bench_problems(config.name) : config.bench_problems;
  op.conformance_problems = default_gemm_conformance_problems(config.name);
  return op;
}

}  // namespace kc
