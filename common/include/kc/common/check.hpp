// kc/common/check.hpp — run once on fresh random inputs and judge the result.
//
// The order matters: operands are made (inputs random, outputs poisoned), the reference is
// computed from the untouched operands, then the kernel runs, and every output is compared.
// Both the tests and kc-bench call this; kc-bench times nothing that has not passed it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kc/common/registry.hpp"

namespace kc {

struct CheckOutcome {
  enum class Status { passed, failed, unsupported };
  Status status = Status::failed;
  std::string detail;          // the comparison summary per output, or why it did not run
  double worst_rel_frobenius = 0.0;
  bool passed() const { return status == Status::passed; }
};

// Runs `run` on fresh operands of `problem` and compares every output with the op's reference.
using RunFn = std::function<void(const Problem&, Operands&, Context&)>;
CheckOutcome check_run(const OpSpec& op, const RunFn& run, const Problem& problem,
                       std::uint64_t seed, Context& context);

// check_run for a registered kernel, after unsupported_reason() lets it run.
CheckOutcome check_kernel(const Registry& registry, const KernelEntry& kernel,
                          const Problem& problem, std::uint64_t seed, Context& context);

// check_run for the op's baseline: a mis-configured peer (say, TF32 sneaking into an FP32
// baseline) is caught like any kernel.
CheckOutcome check_baseline(const OpSpec& op, const Problem& problem, std::uint64_t seed,
                            Context& context);

}  // namespace kc
