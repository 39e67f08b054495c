// Conformance: every registered kernel of one stage against its op's reference, on every
// conformance problem of its dtypes (odd shapes 1, 17, 127, 1000, 4093 in each dimension,
// M != N != K, parameter cases), with several seeds. Outputs are NaN-poisoned and every tensor is
// guarded, so unwritten elements and writes past a tensor fail. A kernel must refuse exactly the
// problems it lists in KernelEntry::refuses: refusing a problem it should run fails, and so does
// running one it lists. Built once per stage (KC_CONFORMANCE_STAGE) and for the playground;
// skips without a GPU, and skips a playground template until it is written.
//
// KC_CONFORMANCE_SEEDS=N sets the number of seeds (default 3); KC_CONFORMANCE_MAX_WORK=W skips
// problems whose dimensions multiply to more than W. The compute-sanitizer runs use both (the
// tools slow kernels down by 10-100x).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kc/bench/all_stages.hpp"
#include "kc/common/check.hpp"
#include "support/gpu_test.hpp"

namespace kc {
namespace {

const Registry& registry() {
  static const Registry r = [] {
    Registry all;
    register_all_stages(all);
    return all;
  }();
  return r;
}

std::vector<std::string> kernel_ids() {
  std::vector<std::string> ids;
  for (const KernelEntry& k : registry().kernels())
    if (k.stage() == KC_CONFORMANCE_STAGE) ids.push_back(k.id);
  return ids;
}

long long env_number(const char* name, long long fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && std::atoll(text) > 0 ? std::atoll(text) : fallback;
}

long long problem_work(const Problem& problem) {
  long long work = 1;
  for (const std::int64_t d : problem.dims) work *= d;
  return work;
}

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, MatchesTheReferenceOnOddShapesAndFreshSeeds) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const KernelEntry& kernel = registry().kernel(GetParam());
  if (!kernel.unwritten.empty()) GTEST_SKIP() << kernel.id << ": " << kernel.unwritten;
  const int cc = context.device().compute_capability();
  if (cc < kernel.min_compute_capability ||
      (kernel.max_compute_capability != 0 && cc > kernel.max_compute_capability))
    GTEST_SKIP() << kernel.id << " runs on sm_" << kernel.min_compute_capability << " to sm_"
                 << (kernel.max_compute_capability ? std::to_string(kernel.max_compute_capability) : "any")
                 << "; this GPU is sm_" << cc;
  const long long seeds = env_number("KC_CONFORMANCE_SEEDS", 3);
  const long long max_work = env_number("KC_CONFORMANCE_MAX_WORK", 0);
  int checked = 0;
  int passed = 0;
  int refused = 0;
  int above_limit = 0;
  for (const Problem& problem : registry().op(kernel.op).conformance_problems) {
    if (!kernel.runs_dtype(problem.dtype)) continue;
    const bool listed = std::find(kernel.refuses.begin(), kernel.refuses.end(), problem.label()) !=
                        kernel.refuses.end();
    const std::string reason = unsupported_reason(registry(), kernel, problem, &context.device());
    EXPECT_EQ(!reason.empty(), listed)
        << kernel.id << " on " << problem.label()
        << (listed ? ": listed in its refusals, but it runs"
                   : ": refused, but not listed in its refusals: " + reason);
    if (!reason.empty()) {
      ++refused;
      continue;  // the same for every seed
    }
    if (max_work > 0 && problem_work(problem) > max_work) {
      ++above_limit;
      continue;
    }
    for (int seed = 1; seed <= seeds; ++seed) {
      const CheckOutcome outcome = check_kernel(registry(), kernel, problem, 1000 * seed + checked, context);
      ++checked;
      passed += outcome.passed() ? 1 : 0;
      EXPECT_TRUE(outcome.passed()) << kernel.id << " on " << problem.label() << ", seed " << seed
                                    << ": " << outcome.detail;
    }
  }
  if (checked == 0 && above_limit > 0)
    GTEST_SKIP() << kernel.id << ": every problem it accepts is above KC_CONFORMANCE_MAX_WORK = "
                 << max_work << "; nothing checked in this (sanitizer) run";
  EXPECT_GT(checked, 0) << kernel.id << " refused every conformance problem";
  std::printf("%s: %d of %d checks passed, %d problems refused as listed\n", kernel.id.c_str(), passed,
              checked, refused);
}

INSTANTIATE_TEST_SUITE_P(Kernels, Conformance, ::testing::ValuesIn(kernel_ids()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name)
                             if (c == '/') c = '_';
                           return name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Conformance);

}  // namespace
}  // namespace kc
