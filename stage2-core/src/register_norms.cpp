// RMSNorm, residual add + RMSNorm and LayerNorm: op descriptions and ladders.
#include <fmt/format.h>

#include "kc/stage2/kernels.hpp"
#include "kc/stage2/references.hpp"
#include "register_helpers.hpp"

namespace kc::stage2::detail {
namespace {

const FillSpec kActivations = FillSpec::normal(0.0, 1.0);
const FillSpec kNormWeight = FillSpec::uniform(0.5, 1.5);
const FillSpec kNormBias = FillSpec::uniform(-0.5, 0.5);
const ShapeFn kMatrix = dims_at({0, 1});  // rows x cols
const ShapeFn kRowVector = dims_at({1});  // cols

std::int64_t rows_of(const Problem& p) { return p.dims[0]; }
std::int64_t cols_of(const Problem& p) { return p.dims[1]; }
double cols_as_terms(const Problem& p) { return static_cast<double>(cols_of(p)); }

// The parts every row-wise norm shares: dims, shapes, accuracy (each output depends on a sum over
// its row), baseline.
OpConfig row_norm(const std::string& name, std::string description,
                  const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = memory_op(name, std::move(description), {"rows", "cols"}, scratch);
  config.bench = row_op_bench_problems(BenchTarget::headline);
  config.conformance = row_op_conformance_problems();
  config.accuracy = summing(&cols_as_terms);
  return config;
}

OpConfig rmsnorm_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = row_norm(
      "rmsnorm",
      fmt::format("y = x / sqrt(mean(x^2) + {:g}) * weight per row; x, weight, y of the dtype, "
                  "float math",
                  kRmsNormEps),
      scratch);
  config.operands = {input("x", kMatrix, kActivations), input("weight", kRowVector, kNormWeight),
                     output("y", kMatrix)};
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> y(static_cast<std::size_t>(rows_of(p) * cols_of(p)));
    rmsnorm_reference(in.at("x").data(), in.at("weight").data(), rows_of(p), cols_of(p),
                      kRmsNormEps, y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 4.0 * elements(p); };
  return config;
}

OpConfig residual_rmsnorm_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = row_norm(
      "residual_rmsnorm",
      fmt::format("sum = x + residual, stored in the dtype (the new residual stream); y = sum / "
                  "sqrt(mean(sum^2) + {:g}) * weight from the stored sum; both written",
                  kRmsNormEps),
      scratch);
  config.operands = {input("x", kMatrix, kActivations), input("residual", kMatrix, kActivations),
                     input("weight", kRowVector, kNormWeight), output("sum", kMatrix),
                     output("y", kMatrix)};
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    const auto count = static_cast<std::size_t>(rows_of(p) * cols_of(p));
    std::vector<double> sum(count), y(count);
    residual_rmsnorm_reference(in.at("x").data(), in.at("residual").data(), in.at("weight").data(),
                               rows_of(p), cols_of(p), kRmsNormEps,
                               [dtype = p.dtype](double s) { return round_to(dtype, s); },
                               sum.data(), y.data());
    return HostTensors{{"sum", std::move(sum)}, {"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 5.0 * elements(p); };
  return config;
}

OpConfig layernorm_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = row_norm(
      "layernorm",
      fmt::format("y = (x - mean) / sqrt(var + {:g}) * weight + bias per row; float math, "
                  "two-pass variance",
                  kLayerNormEps),
      scratch);
  config.operands = {input("x", kMatrix, FillSpec::normal(0.5, 1.0)),
                     input("weight", kRowVector, kNormWeight), input("bias", kRowVector, kNormBias),
                     output("y", kMatrix)};
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> y(static_cast<std::size_t>(rows_of(p) * cols_of(p)));
    layernorm_reference(in.at("x").data(), in.at("weight").data(), in.at("bias").data(), rows_of(p),
                        cols_of(p), kLayerNormEps, y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 7.0 * elements(p); };
  return config;
}

}  // namespace

void register_norm_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  registry.add_op(build_op(rmsnorm_config(scratch)));
  add_ladder<RmsNormArgs>(
      registry, "rmsnorm",
      [](const Problem& p, Operands& o, auto type) {
        using T = typename decltype(type)::type;
        RmsNormArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.weight = o["weight"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {rung<RmsNormArgs>("01_naive", 1, "one thread per row, two serial passes over it",
                         [](const auto& a, cudaStream_t s) { rmsnorm_01_naive(a, s); }),
       rung<RmsNormArgs>("02_block_smem_tree", 2, "a block per row, coalesced, shared-memory tree reduction",
                         [](const auto& a, cudaStream_t s) { rmsnorm_02_block_smem_tree(a, s); }),
       rung<RmsNormArgs>("03_warp_shuffle", 3, "warp-shuffle reductions, one shared-memory exchange",
                         [](const auto& a, cudaStream_t s) { rmsnorm_03_warp_shuffle(a, s); }),
       rung<RmsNormArgs>("04_vectorized", 4, "16-byte loads and stores, still two passes over x",
                         [](const auto& a, cudaStream_t s) { rmsnorm_04_vectorized(a, s); }),
       rung<RmsNormArgs>("05_row_in_registers", 5,
                         "row held in registers: x read once; warp or block per row by length",
                         [](const auto& a, cudaStream_t s) { rmsnorm_05_row_in_registers(a, s); })});

  registry.add_op(build_op(residual_rmsnorm_config(scratch)));
  add_ladder<ResidualRmsNormArgs>(
      registry, "residual_rmsnorm",
      [](const Problem& p, Operands& o, auto type) {
        using T = typename decltype(type)::type;
        ResidualRmsNormArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.residual = o["residual"].data<T>();
        a.weight = o["weight"].data<T>();
        a.sum = o["sum"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {rung<ResidualRmsNormArgs>("01_unfused", 1, "add kernel, then the best RMSNorm: sum makes a DRAM round trip",
                                 [](const auto& a, cudaStream_t s) { residual_rmsnorm_01_unfused(a, s); }),
       rung<ResidualRmsNormArgs>("02_fused_streaming", 2,
                                 "RMSNorm's streaming kernel fed by a CombinedRow (x + residual)",
                                 [](const auto& a, cudaStream_t s) { residual_rmsnorm_02_fused_streaming(a, s); }),
       rung<ResidualRmsNormArgs>("03_fused_in_registers", 3,
                                 "RMSNorm's register kernel fed by a CombinedRow: minimum traffic",
                                 [](const auto& a, cudaStream_t s) { residual_rmsnorm_03_fused_in_registers(a, s); })});

  registry.add_op(build_op(layernorm_config(scratch)));
  add_ladder<LayerNormArgs>(
      registry, "layernorm",
      [](const Problem& p, Operands& o, auto type) {
        using T = typename decltype(type)::type;
        LayerNormArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.weight = o["weight"].data<T>();
        a.bias = o["bias"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {rung<LayerNormArgs>("01_naive", 1, "one thread per row, three serial passes",
                           [](const auto& a, cudaStream_t s) { layernorm_01_naive(a, s); }),
       rung<LayerNormArgs>("02_warp_shuffle", 2, "a block per row, warp-shuffle reductions, three passes",
                           [](const auto& a, cudaStream_t s) { layernorm_02_warp_shuffle(a, s); }),
       rung<LayerNormArgs>("03_vectorized", 3, "16-byte loads and stores, three passes",
                           [](const auto& a, cudaStream_t s) { layernorm_03_vectorized(a, s); }),
       rung<LayerNormArgs>("04_row_in_registers", 4,
                           "row held in registers: x read once, exact two-pass variance",
                           [](const auto& a, cudaStream_t s) { layernorm_04_row_in_registers(a, s); }),
       rung<LayerNormArgs>("05_lean_two_pass", 5,
                           "rung 04 with the deviations held and two barriers instead of four",
                           [](const auto& a, cudaStream_t s) { layernorm_05_lean_two_pass(a, s); })});
}

}  // namespace kc::stage2::detail
