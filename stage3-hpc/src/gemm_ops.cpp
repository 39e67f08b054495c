// The two stage-3 GEMM ops: hgemm_bf16 (C = alpha.A.B^T + beta.C) and gemm_bias_gelu_bf16
// (the same, then + bias and GELU). Both are built from kc::make_gemm_op; the fused op wraps its
// operands, reference and baseline instead of restating them.
#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/fill.hpp"

namespace kc::stage3 {
namespace {

constexpr int kKMultiple = 8;  // 16 bytes of bf16

GemmOpConfig hgemm_config(const std::string& name) {
  GemmOpConfig config;
  config.name = name;
  config.ab_type = DType::bf16;
  config.c_type = DType::bf16;
  config.b_layout = BLayout::n_by_k;
  config.math = MathUnit::fp16_tensor;
  config.precision = DType::bf16;
  for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{
           {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
           {8192, 14336, 4096},  // Llama-3-8B MLP up/gate projection, 8192 tokens
           {8192, 4096, 14336},  // ... and its down projection
           {4093, 2049, 1032}})  // odd M and N: the edge paths, timed
    config.bench_problems.push_back({name, dims});
  return config;
}

// Tensor-core GEMM shapes: every M and N edge case, K a multiple of 8 (1 K tile, a partial K tile,
// many K tiles), alpha/beta, and a few K the ladder must refuse.
std::vector<Problem> hgemm_conformance_problems(const std::string& op) {
  std::vector<Problem> problems;
  const std::vector<std::vector<std::int64_t>> shapes = {
      // smaller than one tile in M, N or both; one partial K step
      {1, 1, 8}, {1, 257, 8}, {17, 1, 24}, {65, 129, 72}, {129, 65, 264},
      // edges in M and N, N odd (scalar stores) and N % 8 == 0 (TMA stores), K not a multiple of 64
      {1000, 17, 128}, {17, 4093, 512}, {200, 300, 136}, {127, 255, 1000}, {65, 520, 200},
      // whole tiles
      {128, 128, 64}, {256, 256, 256}, {384, 512, 640}, {1024, 1024, 1024},
      // many tiles with edges: several persistent waves, cluster strips with an odd tile row count
      {4093, 1000, 1024}, {4093, 2049, 1032}, {1000, 4093, 4096}, {2900, 776, 512},
      // refused: K not a multiple of 8
      {17, 17, 17}, {64, 64, 1}, {128, 128, 1031},
  };
  for (const auto& dims : shapes) problems.push_back({op, dims});
  problems.push_back({op, {127, 129, 136}, 1.5, 0.0});
  problems.push_back({op, {127, 129, 136}, 1.0, 1.0});
  problems.push_back({op, {1000, 1000, 104}, -0.5, 0.25});
  problems.push_back({op, {256, 264, 256}, 2.0, -1.0});
  return problems;
}

}  // namespace

std::string hgemm_shape_error(const Problem& problem) {
  const GemmShape s = gemm_shape(problem);
  if (s.k % kKMultiple != 0)
    return fmt::format(
        "K must be a multiple of {} (got {}): rows of A and B are moved in 16-byte pieces (vector "
        "loads, cp.async, TMA), which must start 16-byte aligned",
        kKMultiple, s.k);
  return {};
}

double gelu_tanh_reference(double x) {
  // 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)): the same function, but 1 + tanh(u)
  // cancels for x below about -5 even in double (it is then below double's epsilon), which left
  // the reference with no correct digits in the negative tail (seen on the H200: values of 1e-16
  // where the function is 1e-40).
  const double sqrt_2_over_pi = std::sqrt(2.0 / 3.14159265358979323846);
  const double u = sqrt_2_over_pi * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

OpSpec make_hgemm_bf16_op() {
  OpSpec op = make_gemm_op(hgemm_config(kHgemmOp));
  op.conformance_problems = hgemm_conformance_problems(op.name);
  return op;
}

OpSpec make_gemm_bias_gelu_bf16_op() {
  OpSpec op = make_gemm_op(hgemm_config(kBiasGeluOp));
  op.conformance_problems = hgemm_conformance_problems(op.name);
  op.description = "C = gelu_tanh(alpha.A.B + beta.C + bias[col]), row-major, A/B bf16, C bf16, "
                   "B N×K, FP32 accumulation, bias bf16 of N";

  const auto gemm_work = op.work;
  op.work = [gemm_work](const Problem& p) {
    Work w = gemm_work(p);
    w.bytes += 2.0 * static_cast<double>(gemm_shape(p).n);  // the bias row
    return w;
  };

  const auto gemm_operands = op.make_operands;
  op.make_operands = [gemm_operands](const Problem& p, std::uint64_t seed, Context& context) {
    Operands operands = gemm_operands(p, seed, context);
    Tensor& bias = operands.add("bias", DType::bf16, {gemm_shape(p).n}, false);
    fill_random(bias.raw(), bias.dtype, bias.count(), seed * 4 + 3, FillSpec::uniform(-1, 1),
                context.stream());
    return operands;
  };

  const auto gemm_reference_values = op.reference;
  op.reference = [gemm_reference_values](const Problem& p, const Operands& o, Context& context) {
    auto values = gemm_reference_values(p, o, context);
    const Tensor& bias = o["bias"];
    const std::vector<double> host_bias =
        to_host_double(bias.raw(), bias.dtype, bias.count(), context.stream());
    std::vector<double>& c = values.at("C");
    const std::size_t n = host_bias.size();
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = gelu_tanh_reference(c[i] + host_bias[i % n]);
    return values;
  };

  const auto gemm_baseline = op.baseline;
  op.baseline_name = "cuBLAS GemmEx (bf16, FP32 accumulation) + separate bias+GELU kernel";
  op.baseline = [gemm_baseline](const Problem& p, Operands& o, Context& context) {
    gemm_baseline(p, o, context);
    const GemmShape s = gemm_shape(p);
    bias_gelu_inplace(o["C"].data<bf16>(), o["bias"].data<bf16>(), static_cast<int>(s.m),
                      static_cast<int>(s.n), context.stream());
  };
  return op;
}

}  // namespace kc::stage3
