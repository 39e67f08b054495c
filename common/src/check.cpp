#include "kc/common/check.hpp"

#include <algorithm>
#include <cmath>

#include "kc/common/fill.hpp"

namespace kc {

const ReferenceCache::Values& ReferenceCache::get(const OpSpec& op, const Problem& problem,
                                                  std::uint64_t seed, const Operands& operands,
                                                  Context& context) {
  const std::string key = op.name + "/" + problem.label() + "/" + std::to_string(seed);
  if (key != key_) {
    key_.clear();  // stays empty if the reference throws
    values_ = op.reference(problem, operands, context);
    key_ = key;
  }
  return values_;
}

CheckOutcome check_run(const OpSpec& op, const RunFn& run, const Problem& problem,
                       std::uint64_t seed, Context& context, ReferenceCache* cache) {
  Operands operands = op.make_operands(problem, seed, context);
  ReferenceCache::Values computed;
  if (cache == nullptr) computed = op.reference(problem, operands, context);
  const ReferenceCache::Values& reference =
      cache != nullptr ? cache->get(op, problem, seed, operands, context) : computed;
  run(problem, operands, context);
  KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));

  CheckOutcome outcome;
  outcome.status = CheckOutcome::Status::passed;
  for (const Tensor& tensor : operands.tensors()) {
    if (!tensor.is_output) continue;
    const auto expected = reference.find(tensor.name);
    require(expected != reference.end(), "op '{}': the reference has no values for output '{}'",
            op.name, tensor.name);
    require(expected->second.size() == tensor.count(),
            "op '{}': reference for '{}' has {} values, the output has {}", op.name, tensor.name,
            expected->second.size(), tensor.count());
    const std::vector<double> actual =
        to_host_double(tensor.raw(), tensor.dtype, tensor.count(), context.stream());
    const Accuracy accuracy = op.accuracy(problem, tensor);
    const CompareResult result = compare(actual.data(), expected->second.data(), actual.size(),
                                         accuracy.tolerance, accuracy.scale);
    if (!result.passed) outcome.status = CheckOutcome::Status::failed;
    outcome.worst_rel_frobenius = std::isnan(result.rel_frobenius)
                                      ? result.rel_frobenius
                                      : std::max(outcome.worst_rel_frobenius, result.rel_frobenius);
    if (!outcome.detail.empty()) outcome.detail += "; ";
    outcome.detail += tensor.name + ": " + result.summary();
  }
  return outcome;
}

CheckOutcome check_kernel(const Registry& registry, const KernelEntry& kernel,
                          const Problem& problem, std::uint64_t seed, Context& context,
                          ReferenceCache* cache) {
  const std::string reason = unsupported_reason(registry, kernel, problem, &context.device());
  if (!reason.empty()) return {CheckOutcome::Status::unsupported, reason, 0.0};
  return check_run(
      registry.op(kernel.op),
      [&](const Problem& p, Operands& o, Context& c) {
        kernel.launch(p, o, c.stream());
        KC_CHECK_LAUNCH();
      },
      problem, seed, context, cache);
}

CheckOutcome check_baseline(const OpSpec& op, const Problem& problem, std::uint64_t seed,
                            Context& context, ReferenceCache* cache) {
  require(static_cast<bool>(op.baseline), "op '{}' has no baseline", op.name);
  if (op.supports) {
    std::string reason = op.supports(problem);
    if (!reason.empty()) return {CheckOutcome::Status::unsupported, reason, 0.0};
  }
  if (!op.baseline_computes_op)
    return {CheckOutcome::Status::passed,
            "the baseline moves the op's bytes without computing the op; nothing to check", 0.0};
  return check_run(op, op.baseline, problem, seed, context, cache);
}

}  // namespace kc
