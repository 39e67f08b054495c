// kc-bench: the one runner. `kc-bench --help` for the flags.
#include "kc/bench/runner.hpp"
#include "kc/testing/negative_controls.hpp"

int main(int argc, char** argv) {
  return kc::bench::run_main(argc, argv, &kc::testing::register_negative_controls);
}
