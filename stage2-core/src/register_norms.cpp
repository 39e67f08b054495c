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

// The parts every row-wise norm shares: dims, shapes, tolerance, baseline.
MemoryOpConfig row_op(const std::string& base, DType dtype, std::string description) {
  MemoryOpConfig config;
  config.name = op_name(base, dtype);
  config.description = std::move(description);
  config.dtype = dtype;
  config.dim_names = {"rows", "cols"};
  config.bench_problems = row_op_bench_problems(config.name, dtype, BenchTarget::issue_target);
  config.conformance_problems = row_op_conformance_problems(config.name);
  return config;
}

std::int64_t rows_of(const Problem& p) { return p.dims[0]; }
std::int64_t cols_of(const Problem& p) { return p.dims[1]; }

MemoryOpConfig rmsnorm_config(DType dtype) {
  MemoryOpConfig config = row_op(
      "rmsnorm", dtype,
      fmt::format("y = x / sqrt(mean(x^2) + {:g}) * weight per row; {} in and out, float math",
                  kRmsNormEps, dtype_name(dtype)));
  config.operands = {input("x", dtype, kMatrix, kActivations),
                     input("weight", dtype, kRowVector, kNormWeight), output("y", dtype, kMatrix)};
  config.reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> y(static_cast<std::size_t>(rows_of(p) * cols_of(p)));
    rmsnorm_reference(in.at("x").data(), in.at("weight").data(), rows_of(p), cols_of(p),
                      kRmsNormEps, y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 4.0 * elements(p); };
  return config;
}

MemoryOpConfig residual_rmsnorm_config(DType dtype) {
  MemoryOpConfig config = row_op(
      "residual_rmsnorm", dtype,
      fmt::format("sum = x + residual (rounded to {0}); y = sum / sqrt(mean(sum^2) + {1:g}) * weight; "
                  "both written",
                  dtype_name(dtype), kRmsNormEps));
  config.operands = {input("x", dtype, kMatrix, kActivations),
                     input("residual", dtype, kMatrix, kActivations),
                     input("weight", dtype, kRowVector, kNormWeight), output("sum", dtype, kMatrix),
                     output("y", dtype, kMatrix)};
  config.reference = [](const Problem& p, const HostTensors& in) {
    const auto count = static_cast<std::size_t>(rows_of(p) * cols_of(p));
    std::vector<double> sum(count), y(count);
    residual_rmsnorm_reference(in.at("x").data(), in.at("residual").data(), in.at("weight").data(),
                               rows_of(p), cols_of(p), kRmsNormEps, sum.data(), y.data());
    return HostTensors{{"sum", std::move(sum)}, {"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 5.0 * elements(p); };
  return config;
}

MemoryOpConfig layernorm_config(DType dtype) {
  MemoryOpConfig config = row_op(
      "layernorm", dtype,
      fmt::format("y = (x - mean) / sqrt(var + {:g}) * weight + bias per row; {} in and out, float "
                  "math, two-pass variance",
                  kLayerNormEps, dtype_name(dtype)));
  config.operands = {input("x", dtype, kMatrix, FillSpec::normal(0.5, 1.0)),
                     input("weight", dtype, kRowVector, kNormWeight),
                     input("bias", dtype, kRowVector, kNormBias), output("y", dtype, kMatrix)};
  config.reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> y(static_cast<std::size_t>(rows_of(p) * cols_of(p)));
    layernorm_reference(in.at("x").data(), in.at("weight").data(), in.at("bias").data(), rows_of(p),
                        cols_of(p), kLayerNormEps, y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 7.0 * elements(p); };
  return config;
}

template <typename T>
void register_norms_for(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  constexpr DType dtype = dtype_of_v<T>;

  registry.add_op(make_memory_op(rmsnorm_config(dtype), scratch));
  add_ladder<RmsNormArgs<T>>(
      registry, op_name("rmsnorm", dtype), dtype,
      [](const Problem& p, Operands& o) {
        RmsNormArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.weight = o["weight"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {{{"01_naive", 1, "one thread per row, two serial passes over it"}, &rmsnorm_01_naive<T>},
       {{"02_block_smem_tree", 2, "a block per row, coalesced, shared-memory tree reduction"},
        &rmsnorm_02_block_smem_tree<T>},
       {{"03_warp_shuffle", 3, "warp-shuffle reductions, one shared-memory exchange"},
        &rmsnorm_03_warp_shuffle<T>},
       {{"04_vectorized", 4, "16-byte loads and stores, still two passes over x"},
        &rmsnorm_04_vectorized<T>},
       {{"05_row_in_registers", 5, "row held in registers: x read once; warp or block per row by length"},
        &rmsnorm_05_row_in_registers<T>}});

  registry.add_op(make_memory_op(residual_rmsnorm_config(dtype), scratch));
  add_ladder<ResidualRmsNormArgs<T>>(
      registry, op_name("residual_rmsnorm", dtype), dtype,
      [](const Problem& p, Operands& o) {
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
      {{{"01_unfused", 1, "add kernel, then the best RMSNorm: sum makes a DRAM round trip"},
        &residual_rmsnorm_01_unfused<T>},
       {{"02_fused_streaming", 2, "RMSNorm's streaming kernel fed by a CombinedRow (x + residual)"},
        &residual_rmsnorm_02_fused_streaming<T>},
       {{"03_fused_in_registers", 3, "RMSNorm's register kernel fed by a CombinedRow: minimum traffic"},
        &residual_rmsnorm_03_fused_in_registers<T>}});

  registry.add_op(make_memory_op(layernorm_config(dtype), scratch));
  add_ladder<LayerNormArgs<T>>(
      registry, op_name("layernorm", dtype), dtype,
      [](const Problem& p, Operands& o) {
        LayerNormArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.weight = o["weight"].data<T>();
        a.bias = o["bias"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {{{"01_naive", 1, "one thread per row, three serial passes"}, &layernorm_01_naive<T>},
       {{"02_warp_shuffle", 2, "a block per row, warp-shuffle reductions, three passes"},
        &layernorm_02_warp_shuffle<T>},
       {{"03_vectorized", 3, "16-byte loads and stores, three passes"}, &layernorm_03_vectorized<T>},
       {{"04_row_in_registers", 4, "row held in registers: x read once, exact two-pass variance"},
        &layernorm_04_row_in_registers<T>},
       {{"05_lean_two_pass", 5, "rung 04 with the deviations held and two barriers instead of four"},
        &layernorm_05_lean_two_pass<T>}});
}

}  // namespace

void register_norm_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  register_norms_for<__nv_bfloat16>(registry, scratch);
  register_norms_for<__half>(registry, scratch);
  register_norms_for<float>(registry, scratch);
}

}  // namespace kc::stage2::detail
