#include "kc/common/check.hpp"

#include <algorithm>
#include <cmath>

namespace kc {

const References& ReferenceCache::get(const OpSpec& op, const Problem& problem, std::uint64_t seed,
                                      const Operands& operands, Context& context) {
  const std::string key = op.name + "/" + problem.label() + "/" + std::to_string(seed);
  if (key != key_) {
    key_.clear();  // stays empty if the reference throws
    values_ = References();  // free the old references before computing new ones
    values_ = op.reference(problem, operands, context);
    key_ = key;
  }
  return values_;
}

CheckOutcome judge_outputs(const OpSpec& op, const Problem& problem, const Operands& operands,
                           const References& references, Context& context) {
  const cudaStream_t stream = context.stream();
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  CheckOutcome outcome;
  outcome.status = CheckOutcome::Status::passed;
  const auto add_detail = [&](const std::string& text) {
    if (!outcome.detail.empty()) outcome.detail += "; ";
    outcome.detail += text;
  };
  for (const Tensor& tensor : operands.tensors()) {
    if (!tensor.is_output) continue;
    const auto expected = references.find(tensor.name);
    require(expected != references.end(), "op '{}': the reference has no values for output '{}'",
            op.name, tensor.name);
    require(expected->second.size() == tensor.count(),
            "op '{}': reference for '{}' has {} values, the output has {}", op.name, tensor.name,
            expected->second.size(), tensor.count());
    const CompareResult result =
        op.compare_choice ? op.compare_choice(problem, tensor, expected->second, operands, stream)
                          : compare_on_device(tensor.raw(), tensor.dtype, expected->second.data(), tensor.count(),
                                              op.accuracy(problem, tensor), stream);
    if (!result.passed) outcome.status = CheckOutcome::Status::failed;
    outcome.worst_rel_frobenius = std::isnan(result.rel_frobenius)
                                      ? result.rel_frobenius
                                      : std::max(outcome.worst_rel_frobenius, result.rel_frobenius);
    add_detail(tensor.name + ": " + result.summary());
  }
  for (const Tensor& tensor : operands.tensors()) {
    const std::size_t damaged = tensor.damaged_guard_bytes(stream);
    if (damaged == 0) continue;
    outcome.status = CheckOutcome::Status::failed;
    add_detail(fmt::format("FAILED: {} guard bytes around '{}' were overwritten: a write outside "
                           "the tensor",
                           damaged, tensor.name));
  }
  return outcome;
}

CheckOutcome check_run(const OpSpec& op, const RunFn& run, const Problem& problem,
                       std::uint64_t seed, Context& context, ReferenceCache* cache) {
  Operands operands = op.make_operands(problem, seed, context);
  References computed;
  if (cache == nullptr) computed = op.reference(problem, operands, context);
  const References& reference =
      cache != nullptr ? cache->get(op, problem, seed, operands, context) : computed;
  run(problem, operands, context);
  return judge_outputs(op, problem, operands, reference, context);
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
  if (op.baseline_supports) {
    std::string reason = op.baseline_supports(problem, context);
    if (!reason.empty()) return {CheckOutcome::Status::unsupported, reason, 0.0};
  }
  if (!op.baseline_computes_op)
    return {CheckOutcome::Status::passed,
            "the baseline moves the op's bytes without computing the op; nothing to check", 0.0};
  return check_run(op, op.baseline, problem, seed, context, cache);
}

}  // namespace kc
