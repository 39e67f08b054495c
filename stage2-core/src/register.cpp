// Files every stage-2 op and rung with the registry. Each op is defined for bf16, f16 and f32:
// the problem carries the dtype (rmsnorm with dtype bf16), each rung runs all three.
#include "kc/stage2/register.hpp"

#include <memory>

#include "register_helpers.hpp"

namespace kc::stage2 {
namespace detail {

OpConfig memory_op(std::string name, std::string description, std::vector<std::string> dim_names,
                   const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config;
  config.name = std::move(name);
  config.description = std::move(description);
  config.dim_names = std::move(dim_names);
  config.dtypes = kStage2Dtypes;
  config.bound = Bound::memory;
  config.copy_scratch = scratch;
  return config;
}

std::vector<ProblemSpec> row_op_conformance_problems() {
  std::vector<ProblemSpec> problems;
  for (std::int64_t cols : {1, 31, 1000, 4097})
    for (std::int64_t rows : {1, 3, 257}) problems.push_back({{rows, cols}});
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {64, 4096}, {7, 8192}, {5, 1024}, {3, 512}, {5, 2050}, {2, 40000}})
    problems.push_back({{rows, cols}});
  return problems;
}

std::vector<ProblemSpec> row_op_bench_problems(BenchTarget target) {
  std::vector<ProblemSpec> problems;
  if (target == BenchTarget::headline) {
    problems.push_back({{32768, 4096}, DType::bf16});
    problems.push_back({{32768, 8192}, DType::bf16});
    problems.push_back({{16384, 4096}, DType::f16});
    problems.push_back({{16384, 4096}, DType::f32});
  } else {
    problems.push_back({{16384, 4096}});
  }
  return problems;
}

std::function<Accuracy(const Problem&, const std::string&, DType)> summing(
    std::function<double(const Problem&)> terms) {
  return [terms = std::move(terms)](const Problem& p, const std::string&, DType output) {
    Accuracy accuracy;
    accuracy.output = output;
    accuracy.terms = terms(p);
    return accuracy;
  };
}

}  // namespace detail

void register_kernels(Registry& registry) {
  if (registry.has_op("rmsnorm")) return;  // already registered
  // One copy scratch for every op's baseline: only the largest copy's buffers are ever held.
  const auto scratch = std::make_shared<CopyScratch>();
  detail::register_norm_ops(registry, scratch);
  detail::register_softmax_and_reduction_ops(registry, scratch);
  detail::register_elementwise_ops(registry, scratch);
  detail::register_rope_and_embedding_ops(registry, scratch);
}

}  // namespace kc::stage2
