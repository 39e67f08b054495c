// Softmax and the row reductions (sum, max, mean, sum of squares): op descriptions and ladders.
#include <fmt/format.h>

#include "kc/stage2/kernels.hpp"
#include "kc/stage2/references.hpp"
#include "register_helpers.hpp"

namespace kc::stage2::detail {
namespace {

const ShapeFn kMatrix = dims_at({0, 1});  // rows x cols
const ShapeFn kColumn = dims_at({0});     // rows

std::int64_t rows_of(const Problem& p) { return p.dims[0]; }
std::int64_t cols_of(const Problem& p) { return p.dims[1]; }
double cols_as_terms(const Problem& p) { return static_cast<double>(cols_of(p)); }
double one_term(const Problem&) { return 1.0; }

OpConfig softmax_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = memory_op(
      "softmax",
      "y = exp(x - max) / sum(exp(x - max)) per row; float math; inputs normal(0, 30), far beyond "
      "exp's float range",
      {"rows", "cols"}, scratch);
  config.bench = row_op_bench_problems(BenchTarget::headline);
  config.conformance = row_op_conformance_problems();
  // Standard deviation 30: rows reach several hundred, so exp(x) without the max overflows.
  config.operands = {input("x", kMatrix, FillSpec::normal(0.0, 30.0)), output("y", kMatrix)};
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> y(static_cast<std::size_t>(rows_of(p) * cols_of(p)));
    softmax_reference(in.at("x").data(), rows_of(p), cols_of(p), y.data());
    return HostTensors{{"y", std::move(y)}};
  };
  config.flops = [](const Problem& p) { return 5.0 * elements(p); };
  // Each output divides by a sum over its row. Outputs average 1/cols, so the bound's absolute
  // part is relative to their rms, not 1: a kernel writing zeros fails.
  config.accuracy = summing(&cols_as_terms);
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

OpConfig reduction_config(const ReductionOp& reduction, const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = memory_op(reduction.name, fmt::format("{}; float accumulation", reduction.formula),
                              {"rows", "cols"}, scratch);
  config.bench = row_op_bench_problems(BenchTarget::other);
  config.conformance = row_op_conformance_problems();
  // Mostly positive: a row's sum stays far from 0, so its relative error measures the kernel's
  // accumulation, not the cancellation of a sum that happens to land near 0 (the one-thread-per-row
  // rung adds 40000 floats in sequence).
  config.operands = {input("x", kMatrix, FillSpec::uniform(-0.5, 1.5)), output("out", kColumn)};
  const RowReduction kind = reduction.kind;
  config.host_reference = [kind](const Problem& p, const HostTensors& in) {
    std::vector<double> out(static_cast<std::size_t>(rows_of(p)));
    row_reduce_reference(kind, in.at("x").data(), rows_of(p), cols_of(p), out.data());
    return HostTensors{{"out", std::move(out)}};
  };
  config.flops = [kind](const Problem& p) {
    return (kind == RowReduction::sum_squares ? 2.0 : 1.0) * elements(p);
  };
  // A float sum of cols values carries rounding error growing like sqrt(cols); a max is exact.
  config.accuracy = summing(kind == RowReduction::max ? &one_term : &cols_as_terms);
  config.baseline_name = "CUB BlockReduce, a block per row";
  config.baseline = [kind](const Problem& p, Operands& o, Context& context) {
    switch (p.dtype) {
      case DType::bf16: row_reduce_cub(row_reduce_args<__nv_bfloat16>(kind, p, o), context.stream()); return;
      case DType::f16: row_reduce_cub(row_reduce_args<__half>(kind, p, o), context.stream()); return;
      default: row_reduce_cub(row_reduce_args<float>(kind, p, o), context.stream()); return;
    }
  };
  return config;
}

}  // namespace

void register_softmax_and_reduction_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  registry.add_op(build_op(softmax_config(scratch)));
  add_ladder<SoftmaxArgs>(
      registry, "softmax",
      [](const Problem& p, Operands& o, auto type) {
        using T = typename decltype(type)::type;
        SoftmaxArgs<T> a;
        a.rows = static_cast<int>(rows_of(p));
        a.cols = static_cast<int>(cols_of(p));
        a.x = o["x"].data<T>();
        a.y = o["y"].data<T>();
        return a;
      },
      {rung<SoftmaxArgs>("01_naive_3pass", 1, "one thread per row: max, sum of exp(x - max), write",
                         [](const auto& a, cudaStream_t s) { softmax_01_naive_3pass(a, s); }),
       rung<SoftmaxArgs>("02_block_3pass", 2, "a block per row, coalesced, the same three passes",
                         [](const auto& a, cudaStream_t s) { softmax_02_block_3pass(a, s); }),
       rung<SoftmaxArgs>("03_online", 3, "online (max, sum) in one pass, one pair reduction, then the write",
                         [](const auto& a, cudaStream_t s) { softmax_03_online(a, s); }),
       rung<SoftmaxArgs>("04_online_vectorized", 4, "online softmax with 16-byte loads and stores",
                         [](const auto& a, cudaStream_t s) { softmax_04_online_vectorized(a, s); }),
       rung<SoftmaxArgs>("05_row_in_registers", 5, "row held in registers: one read, one exp per element",
                         [](const auto& a, cudaStream_t s) { softmax_05_row_in_registers(a, s); }),
       rung<SoftmaxArgs>("06_lean_exp", 6,
                         "rung 05 in under half the instructions: flushing exp, max-then-sum reduction",
                         [](const auto& a, cudaStream_t s) { softmax_06_lean_exp(a, s); })});

  for (const ReductionOp& reduction : kReductions) {
    registry.add_op(build_op(reduction_config(reduction, scratch)));
    const RowReduction kind = reduction.kind;
    add_ladder<RowReduceArgs>(
        registry, reduction.name,
        [kind](const Problem& p, Operands& o, auto type) {
          return row_reduce_args<typename decltype(type)::type>(kind, p, o);
        },
        {rung<RowReduceArgs>("01_naive", 1, "one thread per row",
                             [](const auto& a, cudaStream_t s) { row_reduce_01_naive(a, s); }),
         rung<RowReduceArgs>("02_warp_shuffle", 2, "a block per row, warp-shuffle reduction",
                             [](const auto& a, cudaStream_t s) { row_reduce_02_warp_shuffle(a, s); }),
         rung<RowReduceArgs>("03_vectorized", 3, "16-byte loads; a warp or a block per row by length",
                             [](const auto& a, cudaStream_t s) { row_reduce_03_vectorized(a, s); })});
  }
}

}  // namespace kc::stage2::detail
