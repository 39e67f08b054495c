// Registry rules, and the rules every registered kernel of every stage must follow.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "kc/bench/runner.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/registry.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc {
namespace {

OpSpec small_gemm_op() {
  GemmOpConfig config;
  config.name = "sgemm";
  return make_gemm_op(config);
}

KernelEntry entry(std::string id, std::string op = "sgemm") {
  KernelEntry k;
  k.id = std::move(id);
  k.op = std::move(op);
  k.rung = 1;
  k.idea = "test";
  k.launch = [](const Problem&, Operands&, cudaStream_t) {};
  return k;
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, AcceptsAWellFormedKernel) {
  Registry r;
  r.add_op(small_gemm_op());
  r.add_kernel(entry("stage1/sgemm/01_naive"));
  EXPECT_EQ(r.kernel("stage1/sgemm/01_naive").stage(), "stage1");
  EXPECT_EQ(r.kernel("stage1/sgemm/01_naive").report_group(), "stage1");
}

TEST(Registry, RejectsMalformedIdsWithAnExplanation) {
  Registry r;
  r.add_op(small_gemm_op());
  for (const char* bad : {"sgemm/01", "stage5/sgemm/x", "stage1/sgemm/", "stage1/sgemm/a b",
                          "stage1/sgemm/x/y", "Stage1/sgemm/x"})
    EXPECT_NE(message_of([&] { r.add_kernel(entry(bad)); }).find("stageN/<op>/<name>"),
              std::string::npos)
        << bad;
}

TEST(Registry, AcceptsPlaygroundKernelsAndAnUnwrittenTemplateRefusesEverything) {
  Registry r;
  r.add_op(small_gemm_op());
  KernelEntry k = entry("playground/sgemm/my_sgemm");
  k.unwritten = "playground/sgemm.cu is a template: write it";
  r.add_kernel(k);
  const KernelEntry& kernel = r.kernel(k.id);
  EXPECT_EQ(kernel.stage(), "playground");
  EXPECT_EQ(unsupported_reason(r, kernel, gemm_problem("sgemm", {64, 64, 64}, DType::f32), nullptr), k.unwritten);
  KernelEntry written = entry("playground/sgemm/mine");
  r.add_kernel(written);
  EXPECT_EQ(unsupported_reason(r, r.kernel(written.id), gemm_problem("sgemm", {64, 64, 64}, DType::f32), nullptr), "");
  EXPECT_NE(message_of([&] { r.add_kernel(entry("playgrounds/sgemm/x")); }).find("stageN/<op>/<name>"),
            std::string::npos);
}

TEST(Registry, RejectsDuplicatesUnknownOpsAndMismatches) {
  Registry r;
  r.add_op(small_gemm_op());
  r.add_kernel(entry("stage1/sgemm/a"));
  EXPECT_NE(message_of([&] { r.add_kernel(entry("stage1/sgemm/a")); }).find("twice"), std::string::npos);
  EXPECT_NE(message_of([&] { r.add_kernel(entry("stage2/softmax/a", "softmax")); }).find("not registered"),
            std::string::npos);
  EXPECT_NE(message_of([&] { r.add_kernel(entry("stage1/hgemm/a", "sgemm")); }).find("filed under"),
            std::string::npos);
  EXPECT_NE(message_of([&] { r.add_op(small_gemm_op()); }).find("twice"), std::string::npos);
  KernelEntry no_launch = entry("stage1/sgemm/b");
  no_launch.launch = nullptr;
  EXPECT_NE(message_of([&] { r.add_kernel(no_launch); }).find("no launch"), std::string::npos);
  KernelEntry bad_cc = entry("stage1/sgemm/c");
  bad_cc.min_compute_capability = 9;
  EXPECT_NE(message_of([&] { r.add_kernel(bad_cc); }).find("capability"), std::string::npos);
}

TEST(Registry, RejectsAnIncompleteOp) {
  Registry r;
  OpSpec op = small_gemm_op();
  op.reference = nullptr;
  EXPECT_THROW(r.add_op(op), Error);
}

TEST(Registry, SelectsByRegexAndExplainsABadOne) {
  Registry r;
  r.add_op(small_gemm_op());
  r.add_kernel(entry("stage1/sgemm/01_naive"));
  r.add_kernel(entry("stage1/sgemm/02_coalesced"));
  EXPECT_EQ(r.select("").size(), 2u);
  EXPECT_EQ(r.select("02_").size(), 1u);
  EXPECT_EQ(r.select("stage1/sgemm").size(), 2u);
  EXPECT_EQ(r.select("stage2").size(), 0u);
  EXPECT_NE(message_of([&] { r.select("(("); }).find("regular expression"), std::string::npos);
}

TEST(Registry, UnsupportedReasonsNameTheConstraint) {
  Registry r;
  r.add_op(small_gemm_op());
  KernelEntry k = entry("stage1/sgemm/needs_multiple_of_32");
  k.min_compute_capability = 90;
  k.supports = [](const Problem& p) -> std::string {
    return p.dims[0] % 32 == 0 ? "" : "M must be a multiple of 32";
  };
  r.add_kernel(k);
  const KernelEntry& kernel = r.kernel(k.id);
  EXPECT_EQ(unsupported_reason(r, kernel, gemm_problem("sgemm", {64, 1, 1}, DType::f32), nullptr), "");
  EXPECT_EQ(unsupported_reason(r, kernel, gemm_problem("sgemm", {33, 1, 1}, DType::f32), nullptr), "M must be a multiple of 32");
  EXPECT_NE(unsupported_reason(r, kernel, gemm_problem("sgemm", {64, 1}, DType::f32), nullptr).find("dimensions"), std::string::npos);
  EXPECT_NE(unsupported_reason(r, kernel, gemm_problem("softmax", {64, 1, 1}, DType::f32), nullptr).find("implements"),
            std::string::npos);
  EXPECT_NE(unsupported_reason(r, kernel, gemm_problem("sgemm", {64, 1, 1}, DType::bf16), nullptr).find("runs f32, not bf16"),
            std::string::npos);
  DeviceInfo ampere;
  ampere.name = "A100";
  ampere.cc_major = 8;
  EXPECT_NE(unsupported_reason(r, kernel, gemm_problem("sgemm", {64, 1, 1}, DType::f32), &ampere).find("9.0"), std::string::npos);
  // 32-bit indexing limit of the op applies to every kernel
  EXPECT_NE(unsupported_reason(r, kernel, gemm_problem("sgemm", {65536, 65536, 64}, DType::f32), nullptr).find("32-bit"),
            std::string::npos);
}

// --- the real registry --------------------------------------------------------------------

TEST(AllStages, RegisterWithoutErrorsAndFollowTheRules) {
  Registry r;
  register_all_stages(r);
  ASSERT_FALSE(r.kernels().empty());
  std::map<std::string, std::set<int>> rungs;  // per stage/op: rung numbers are unique
  for (const KernelEntry& k : r.kernels()) {
    const OpSpec& op = r.op(k.op);
    EXPECT_FALSE(op.conformance_problems.empty()) << k.id << ": its op has no conformance problems";
    EXPECT_FALSE(op.bench_problems.empty()) << k.id << ": its op has no documented shapes";
    EXPECT_TRUE(static_cast<bool>(op.baseline)) << k.op << " has no baseline to compare with";
    EXPECT_GE(k.rung, 1) << k.id;
    EXPECT_TRUE(rungs[k.stage() + "/" + k.op].insert(k.rung).second) << k.id << ": rung number reused";
    EXPECT_EQ(k.id.find("/nc_"), std::string::npos) << "negative controls stay out of the real registry";
    // Every refusal a kernel lists is one of its op's conformance problems.
    for (const std::string& label : k.refuses) {
      const bool listed = std::any_of(op.conformance_problems.begin(), op.conformance_problems.end(),
                                      [&](const Problem& p) { return p.label() == label; });
      EXPECT_TRUE(listed) << k.id << " refuses '" << label << "', which is no conformance problem";
    }
  }
}

// A kernel refuses exactly the conformance problems it lists (checked here without a GPU; the
// conformance suite holds every kernel to the same rule on the device).
TEST(AllStages, KernelsRefuseExactlyTheConformanceProblemsTheyList) {
  Registry r;
  register_all_stages(r);
  for (const KernelEntry& k : r.kernels()) {
    if (!k.unwritten.empty()) continue;  // a playground template refuses everything until written
    for (const Problem& p : r.op(k.op).conformance_problems) {
      if (!k.runs_dtype(p.dtype)) continue;
      const bool refused = !unsupported_reason(r, k, p, nullptr).empty();
      const bool listed = std::find(k.refuses.begin(), k.refuses.end(), p.label()) != k.refuses.end();
      EXPECT_EQ(refused, listed) << k.id << " on " << p.label()
                                 << (refused ? ": refused but not listed" : ": listed but runs");
    }
  }
}

// The playground files one template per op; until the learner writes one it refuses with a
// sentence naming its file, and once written it is held to the rules above like any rung.
TEST(AllStages, ThePlaygroundHasATemplatePerOp) {
  Registry r;
  register_all_stages(r);
  for (const char* op : {"sgemm", "softmax", "row_sum", "hgemm"}) {
    const std::string id = fmt::format("playground/{}/my_{}", op, op);
    const KernelEntry& k = r.kernel(id);
    EXPECT_EQ(k.report_group(), "playground");
    if (!k.unwritten.empty()) {
      EXPECT_NE(k.unwritten.find(fmt::format("playground/{}.cu", op)), std::string::npos) << k.unwritten;
    }
  }
}

TEST(AllStages, ProblemsAreWellFormedForTheirOps) {
  Registry r;
  register_all_stages(r);
  for (const OpSpec& op : r.ops()) {
    EXPECT_FALSE(op.dtypes.empty()) << op.name;
    for (const auto* problems : {&op.bench_problems, &op.conformance_problems})
      for (const Problem& p : *problems) {
        EXPECT_TRUE(op.has_dtype(p.dtype)) << op.name << " " << p.label();
        ASSERT_EQ(p.params.size(), op.params.size()) << op.name << " " << p.label();
        for (std::size_t i = 0; i < p.params.size(); ++i) EXPECT_EQ(p.params[i].name, op.params[i].name);
      }
  }
}

TEST(AllStages, NegativeControlsRegisterBesideTheRealKernels) {
  Registry r;
  register_all_stages(r);
  const std::size_t real = r.kernels().size();
  testing::register_negative_controls(r);
  EXPECT_EQ(r.kernels().size(), real + testing::negative_controls().size());
  for (const auto& control : testing::negative_controls()) {
    const KernelEntry& entry = r.kernel(control.id);
    EXPECT_EQ(entry.report_group(), "negative-controls") << control.id;
    EXPECT_EQ(entry.rung, 0) << control.id;  // on no ladder
    EXPECT_EQ(entry.idea, "NEGATIVE CONTROL: " + control.flaw) << control.id;
    EXPECT_EQ(control.id.rfind(entry.stage() + "/" + entry.op + "/nc_", 0), 0u) << control.id;
  }
}

// The FP8 control that runs rung 12's kernel refuses, through its supports, the conformance problems
// that kernel's launch refuses (M % 4 != 0: s_A's rows loaded by TMA), and keeps the one it must
// fail (256x256x8192 with block scales, every tile split).
TEST(AllStages, Fp8SplitControlRefusesWhatRung12sLaunchRefuses) {
  Registry r;
  register_all_stages(r);
  testing::register_negative_controls(r);
  const KernelEntry& control = r.kernel("stage3/fp8_gemm/nc_split_pieces_added_twice");
  int refused_for_m = 0;
  bool kept_the_split_problem = false;
  for (const Problem& p : r.op(control.op).conformance_problems) {
    if (!p.has_param("scaling") || p.param("scaling") != 1.0 || p.dims[2] % 16 != 0) continue;
    const std::string reason = unsupported_reason(r, control, p, nullptr);
    if (p.dims[0] % 4 != 0) {
      EXPECT_NE(reason.find("M % 4 == 0"), std::string::npos) << p.label() << ": " << reason;
      ++refused_for_m;
    } else {
      EXPECT_EQ(reason, "") << p.label();
    }
    if (p.shape() == "256x256x8192") kept_the_split_problem = reason.empty();
  }
  EXPECT_GT(refused_for_m, 0);
  EXPECT_TRUE(kept_the_split_problem);
}

}  // namespace
}  // namespace kc
