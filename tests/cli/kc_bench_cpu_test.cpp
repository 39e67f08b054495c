// kc-bench as a learner meets it first: --list and --help work anywhere, bad flags are explained,
// and without a GPU it says so in one sentence and exits 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kc/common/device.hpp"
#include "support/run_program.hpp"

namespace {

using kc::testing::ProgramRun;
using kc::testing::run_kc_bench;

TEST(KcBenchCli, ListWorksWithoutAGpu) {
  const ProgramRun r = run_kc_bench("--list");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stage1/sgemm/01_naive"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("/nc_"), std::string::npos) << "negative controls are hidden by default";
}

TEST(KcBenchCli, ListHonoursTheFilterAndShowsNegativeControlsOnRequest) {
  const ProgramRun r = run_kc_bench("--list --include-negative-controls --filter nc_");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nc_writes_nothing"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("01_naive"), std::string::npos) << r.output;
}

TEST(KcBenchCli, HelpAndBadFlags) {
  const ProgramRun help = run_kc_bench("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--filter"), std::string::npos);
  const ProgramRun bad = run_kc_bench("--frobnicate");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("unknown argument '--frobnicate'"), std::string::npos) << bad.output;
}

TEST(KcBenchCli, AnUnreadablePeersFileIsRefusedBeforeTheRun) {
  // Before anything is checked or timed (with or without a GPU), not after a run of minutes.
  const ProgramRun r = run_kc_bench("--filter stage1/sgemm/01_naive --peers /nonexistent/kc/peers.tsv");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot read --peers file '/nonexistent/kc/peers.tsv'"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("kc-bench on "), std::string::npos) << "the run started:\n" << r.output;
}

TEST(KcBenchCli, WithoutAGpuItSaysSoAndExitsTwo) {
  if (kc::has_gpu()) GTEST_SKIP() << "this machine has a GPU, so the no-GPU path cannot be exercised";
  const ProgramRun r = run_kc_bench("--filter stage1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no CUDA GPU is visible"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one sentence:\n" << r.output;
}

}  // namespace
