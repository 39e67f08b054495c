// Softmax and the row reductions (sum, max, mean, sum of squares): op descriptions and ladders.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kc/stage2/kernels.hpp"
#include "kc/stage2/references.hpp"
#include "register_helpers.hpp"

namespace kc::stage2::detail {
namespace {

const ShapeFn kMatrix = dims_at({0, 1});  // rows x cols
const ShapeFn kColumn = dims_at({0});     // rows

std::int64_t rows_of(const Problem& p) { return p.dims[0]; }
std::int64_t cols_of(const Problem& p) { return p.dims[1]; }

MemoryOpConfig rowwise(const std::string& name, DType dtype, std::string description,
                       BenchTarget target = BenchTarget::other) {
  MemoryOpConfig config;
  config.name = name;
  config.description = std::move(description);
  config.dtype = dtype;
  config.dim_names = {"rows", "cols"};
  config.bench_problems = row_op_bench_problems(name, dtype, target);
  config.conformance_problems = row_op_conformance_problems(name);
  return config;
}

MemoryOpConfig softmax_config(DType dtype) {
  MemoryOpConfig config =
      rowwise(op_name("softmax", dtype), dtype,
              fmt::format("y = exp(x - max) / sum(exp(x - max)) per row; {} in and out, float math; "
                          "inputs normal(0, 30), far beyond exp's float range",
                          dtype_name(dtype)),
              BenchTarget::issue_target);
  // Standard deviation 30: rows reach several hundred, so exp(x) without the max overflows.
  config.operands = {input("x", dtype, kMatrix, FillSpec::normal(0.0, 30.0)),
                     output("y", dtype, kMatrix)};
  config.reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> y(static_cast<std::size_t>(rows_of(p) * cols_of(p)));
    softmax_reference(in.at("x").data(), rows_of(p), cols_of(p), y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 5.0 * elements(p); };
  // Outputs average 1/cols: an absolute bound of atol alone would let a kernel writing zeros pass.
  // fp16 cannot resolve less than its subnormal spacing 2^-24, so its bound stops shrinking there.
  const double resolution = dtype == DType::f16 ? std::ldexp(1.0, -24) / tolerance_for(dtype).atol : 0.0;
  config.tolerance_scale = [resolution](const Problem& p, const std::string&) {
    return std::max(1.0 / static_cast<double>(cols_of(p)), resolution);
  };
  return config;
}

struct ReductionOp {
  RowReduction kind;
  const char* name;
  const char* formula;
};

constexpr ReductionOp kReductions[] = {
    {RowReduction::sum, "row_sum", "out[r] = sum of row r"},
    {RowReduction::max, "row_max", "out[r] = max of row r (NaN if the row holds one)"},
    {RowReduction::mean, "row_mean", "out[r] = mean of row r"},
    {RowReduction::sum_squares, "row_sumsq", "out[r] = sum of squares of row r"},
};

template <typename T>
RowReduceArgs<T> row_reduce_args(RowReduction kind, const Problem& p, Operands& o) {
  RowReduceArgs<T> a;
  a.kind = kind;
  a.rows = static_cast<int>(rows_of(p));
  a.cols = static_cast<int>(cols_of(p));
  a.x = o["x"].data<T>();
  a.out = o["out"].data<T>();
  return a;
}

template <typename T>
MemoryOpConfig reduction_config(const ReductionOp& reduction) {
  constexpr DType dtype = dtype_of_v<T>;
  MemoryOpConfig config =
      rowwise(op_name(reduction.name, dtype), dtype,
              fmt::format("{}; {} in and out, float accumulation", reduction.formula, dtype_name(dtype)));
  // Mostly positive: a row's sum stays far from 0, so its relative error measures the kernel's
  // accumulation, not the cancellation of a sum that happens to land near 0 (the one-thread-per-row
  // rung adds 40000 floats in sequence).
  config.operands = {input("x", dtype, kMatrix, FillSpec::uniform(-0.5, 1.5)),
                     output("out", dtype, kColumn)};
  const RowReduction kind = reduction.kind;
  config.reference = [kind](const Problem& p, const HostTensors& in) {
    std::vector<double> out(static_cast<std::size_t>(rows_of(p)));
    row_reduce_reference(kind, in.at("x").data(), rows_of(p), cols_of(p), out.data());
    return HostTensors{{"out", std::move(out)}};
  };
  config.flops = [kind](const Problem& p) {
    return (kind == RowReduction::sum_squares ? 2.0 : 1.0) * elements(p);
  };
  // A float sum of cols values carries rounding error growing like sqrt(cols).
  config.tolerance_scale = [kind](const Problem& p, const std::string&) {
    return kind == RowReduction::sum || kind == RowReduction::sum_squares
               ? std::sqrt(static_cast<double>(cols_of(p)))
               : 1.0;
  };
  config.baseline_name = "CUB BlockReduce, a block per row";
  config.baseline = [kind](const Problem& p, Operands& o, Context& context) {
    row_reduce_cub(row_reduce_args<T>(kind, p, o), context.stream());
  };
  return config;
}

template <typename T>
void register_for(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  constexpr DType dtype = dtype_of_v<T>;
  registry.add_op(make_memory_op(softmax_config(dtype), scratch));
  add_ladder<SoftmaxArgs<T>>(
      registry, op_name("softmax", dtype), dtype,
      [](const Problem& p, Operands& o) {
        SoftmaxArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {{{"01_naive_3pass", 1, "one thread per row: max, sum of exp(x - max), write"},
        &softmax_01_naive_3pass<T>},
       {{"02_block_3pass", 2, "a block per row, coalesced, the same three passes"},
        &softmax_02_block_3pass<T>},
       {{"03_online", 3, "online (max, sum) in one pass, one pair reduction, then the write"},
        &softmax_03_online<T>},
       {{"04_online_vectorized", 4, "online softmax with 16-byte loads and stores"},
        &softmax_04_online_vectorized<T>},
       {{"05_row_in_registers", 5, "row held in registers: one read, one exp per element"},
        &softmax_05_row_in_registers<T>},
       {{"06_lean_exp", 6, "rung 05 in under half the instructions: flushing exp, max-then-sum reduction"},
        &softmax_06_lean_exp<T>}});

  for (const ReductionOp& reduction : kReductions) {
    const std::string op = op_name(reduction.name, dtype);
    registry.add_op(make_memory_op(reduction_config<T>(reduction), scratch));
    const RowReduction kind = reduction.kind;
    add_ladder<RowReduceArgs<T>>(
        registry, op, dtype,
        [kind](const Problem& p, Operands& o) { return row_reduce_args<T>(kind, p, o); },
        {{{"01_naive", 1, "one thread per row"}, &row_reduce_01_naive<T>},
         {{"02_warp_shuffle", 2, "a block per row, warp-shuffle reduction"}, &row_reduce_02_warp_shuffle<T>},
         {{"03_vectorized", 3, "16-byte loads; a warp or a block per row by length"},
          &row_reduce_03_vectorized<T>}});
  }
}

}  // namespace

void register_softmax_and_reduction_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  register_for<__nv_bfloat16>(registry, scratch);
  register_for<__half>(registry, scratch);
  register_for<float>(registry, scratch);
}

}  // namespace kc::stage2::detail
