// kc/common/check.hpp — run once on fresh random inputs and judge the result.
//
// The order matters: operands are made (inputs random, outputs poisoned, guard bytes written),
// the reference is computed from the untouched operands, then the kernel runs, and every output is
// compared on the GPU (compare_on_device) and every guard checked. Both the tests and kc-bench
// call this; kc-bench times nothing that has not passed it, and checks the output of its last
// timed launch the same way (judge_outputs).
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

// Remembers the references of the last (op, problem, seed) checked. Operands are a deterministic
// function of (problem, seed), so every rung checked on the same problem and seed needs the same
// reference — and for large problems that reference costs more than everything else in the check.
class ReferenceCache {
 public:
  const References& get(const OpSpec& op, const Problem& problem, std::uint64_t seed,
                        const Operands& operands, Context& context);

 private:
  std::string key_;
  References values_;
};

// Compares every output in `operands` with `references` and checks every tensor's guard bytes.
CheckOutcome judge_outputs(const OpSpec& op, const Problem& problem, const Operands& operands,
                           const References& references, Context& context);

// Runs `run` on fresh operands of `problem` and judges them against the op's reference (taken
// from `cache` when it holds this op, problem and seed).
using RunFn = std::function<void(const Problem&, Operands&, Context&)>;
CheckOutcome check_run(const OpSpec& op, const RunFn& run, const Problem& problem,
                       std::uint64_t seed, Context& context, ReferenceCache* cache = nullptr);

// check_run for a registered kernel, after unsupported_reason() lets it run.
CheckOutcome check_kernel(const Registry& registry, const KernelEntry& kernel,
                          const Problem& problem, std::uint64_t seed, Context& context,
                          ReferenceCache* cache = nullptr);

// check_run for the op's baseline: a mis-configured peer (say, TF32 sneaking into an FP32
// baseline) is caught like any kernel. A problem the op or its baseline_supports refuses is
// reported unsupported, with the reason.
CheckOutcome check_baseline(const OpSpec& op, const Problem& problem, std::uint64_t seed,
                            Context& context, ReferenceCache* cache = nullptr);

}  // namespace kc
