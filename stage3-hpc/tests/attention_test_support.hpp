// Helpers the attention tests share: the registered op, and the problems a correct attention
// computed with the wrong parameters would have solved (the negative controls' inputs).
#pragma once

#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3::testing_support {

// attention_fwd as stage 3 registers it (with the baseline this build declares).
inline const OpSpec& registered_attention_op() {
  static const Registry registry = [] {
    Registry r;
    register_kernels(r);
    return r;
  }();
  return registry.op(kAttentionFwdOp);
}

// `problem` with its scale 25% off, and (when causal) without its mask: an implementation run
// with one of these on `problem`'s operands must fail the check.
inline std::vector<Problem> wrongly_parameterized(const Problem& problem) {
  std::vector<Problem> wrong;
  Problem wrong_scale = problem;
  wrong_scale.set("scale", 1.25 * attention_scale(problem));
  wrong.push_back(wrong_scale);
  if (attention_causal(problem)) {
    Problem no_mask = problem;
    no_mask.set("causal", 0.0);
    wrong.push_back(no_mask);
  }
  return wrong;
}

}  // namespace kc::stage3::testing_support
