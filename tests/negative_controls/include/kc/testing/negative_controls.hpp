// kc/testing/negative_controls.hpp — deliberately wrong SGEMM kernels: a test of the tests.
//
// Each has one realistic flaw. The conformance machinery must report every one of them as
// failing; kc-bench --include-negative-controls must report them FAILED and never time them.
#pragma once

#include <string>
#include <vector>

#include "kc/common/registry.hpp"

namespace kc::testing {

struct NegativeControl {
  std::string id;    // "stage1/sgemm/nc_writes_nothing"
  std::string flaw;  // what is wrong with it
};

// The controls, in registration order.
std::vector<NegativeControl> negative_controls();

// Registers the sgemm op (if missing) and the controls, in the "negative-controls" report group.
void register_negative_controls(Registry& registry);

}  // namespace kc::testing
