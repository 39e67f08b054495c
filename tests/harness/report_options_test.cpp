// kc-bench's report writers and option parser (host code, no GPU needed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kc/bench/report.hpp"
#include "kc/bench/runner.hpp"
#include "kc/common/text_io.hpp"

namespace kc::bench {
namespace {

RunInfo info() {
  RunInfo i;
  i.gpu = "NVIDIA H200";
  i.gpu_details = "sm_90, 132 SMs, 60 MiB L2, 140 GiB";
  i.driver = "580.159.04, supports CUDA 13.0";
  i.cuda_runtime = "13.0";
  i.cublas = "13.1.0";
  i.peak_sm_clock_mhz = 1980;
  i.date = "2026-11-29 12:00 UTC";
  i.commit = "0123456789ab";
  i.command = "kc-bench --filter stage1";
  return i;
}

Result row(std::string kernel, bool baseline, Status status, double tflops, double pct) {
  Result r;
  r.kernel = std::move(kernel);
  r.is_baseline = baseline;
  r.rung = baseline ? 0 : 1;
  r.group = baseline ? "" : "stage1";
  r.op = "sgemm";
  r.op_description = "C = alpha.A.B + beta.C";
  r.dtype = "f32";
  r.shape = "4096x4096x4096";
  r.params = {{"alpha", 1.0, true}, {"beta", 0.0, true}};
  r.label = "4096x4096x4096 f32";
  r.status = status;
  r.median_ms = 2.0;
  r.p10_ms = 1.9;
  r.p90_ms = 2.1;
  r.samples = 50;
  r.tflops = tflops;
  r.gbps = 100;
  r.baseline = "cuBLAS SGEMM (FP32, pedantic)";
  r.baseline_ms = baseline ? 0.0 : 1.9;
  r.pct_of_baseline = pct;
  r.ceiling = "FP32 CUDA cores, 66.9 TFLOPS";
  r.pct_of_ceiling = 100 * tflops / 66.9;
  return r;
}

std::vector<Result> sample_results() {
  std::vector<Result> results;
  results.push_back(row("cuBLAS SGEMM (FP32, pedantic)", true, Status::ok, 51.0, 0));
  results.push_back(row("stage1/sgemm/01_naive", false, Status::ok, 48.45, 95.0));
  Result failed = row("stage1/sgemm/02_broken", false, Status::failed, 0, 0);
  failed.rung = 2;
  failed.detail = "C: FAILED: 3 of 9 elements outside |out-ref| <= ...";
  results.push_back(failed);
  Result other = row("stage2/softmax/01", false, Status::ok, 0, 0);
  other.group = "stage2";
  other.op = "softmax";
  results.push_back(other);
  return results;
}

TEST(Report, PrettyShapes) {
  EXPECT_EQ(pretty_shape("4096x4096x4096"), "4096³");
  EXPECT_EQ(pretty_shape("4093x2049x1031"), "4093×2049×1031");
  EXPECT_EQ(pretty_shape("32768x4096"), "32768×4096");
}

TEST(Report, JsonEscapes) {
  EXPECT_EQ(kc::json_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(kc::json_escape(std::string("\x01", 1)), "\\u0001");
  EXPECT_EQ(kc::json_string("x"), "\"x\"");
}

TEST(Report, MarkdownIsHeadedByWhereAndWhenAndShowsRatiosAndFailures) {
  const std::string md = render_markdown(info(), "stage1", sample_results());
  for (const char* expected : {"NVIDIA H200", "580.159.04", "13.0", "1980 MHz", "2026-11-29",
                               "0123456789ab", "kc-bench --filter stage1", "4096³",
                               "48.5 (95%)", "cuBLAS SGEMM (FP32, pedantic)", "FAILED"})
    EXPECT_NE(md.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << md;
  EXPECT_EQ(md.find("softmax"), std::string::npos) << "other groups stay out";
  EXPECT_NE(md.find("outside \\|out-ref\\|"), std::string::npos) << "'|' escaped inside cells";
  RunInfo with_pipe = info();
  with_pipe.command = "kc-bench --filter 'stage2/(rmsnorm|softmax)_bf16/'";
  EXPECT_NE(render_markdown(with_pipe, "stage1", sample_results()).find("(rmsnorm\\|softmax)"),
            std::string::npos) << "a regex filter in the command must not split the table row";
}

// A problem whose buffers the GPU could not allocate is shown as such, with its reason, and is
// neither a figure nor a failure.
TEST(Report, AProblemThatDoesNotFitSaysSoInTheTableAndTheJson) {
  std::vector<Result> results = sample_results();
  Result big = row("stage1/sgemm/03_big", false, Status::too_large, 0, 0);
  big.rung = 3;
  big.detail = "its buffers do not fit in this GPU's free memory: cudaMalloc(16384.0 MiB) with 14700.2 of 81079.0 MiB free";
  results.push_back(big);
  const std::string md = render_markdown(info(), "stage1", results);
  EXPECT_NE(md.find("| does not fit |"), std::string::npos) << md;
  EXPECT_NE(md.find("cudaMalloc(16384.0 MiB) with 14700.2"), std::string::npos) << "the reason is in the details";
  const std::string js = render_json(info(), "stage1", results);
  EXPECT_NE(js.find("\"status\": \"does not fit\", \"correct\": null"), std::string::npos) << js;
}

TEST(Report, ShowsTheBaselineTimedAlongsideOnlyWhenItWas) {
  std::vector<Result> results = sample_results();
  results[1].baseline_paired = true;
  results[1].baseline_ms = 1.234567;
  const std::string md = render_markdown(info(), "stage1", results);
  EXPECT_NE(md.find("baseline ms alongside"), std::string::npos);
  EXPECT_NE(md.find("| 1.2346 | 95.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("alternate with samples of the baseline"), std::string::npos) << "method says how";
  const std::string js = render_json(info(), "stage1", results);
  EXPECT_NE(js.find("\"baseline_ms\": 1.234567, \"baseline_alongside\": true"), std::string::npos) << js;
  results[1].baseline_paired = false;
  const std::string solo = render_markdown(info(), "stage1", results);
  EXPECT_EQ(solo.find("| 1.2346 |"), std::string::npos) << "a solo comparison shows no alongside time";
  EXPECT_NE(render_json(info(), "stage1", results).find("\"baseline_alongside\": false"), std::string::npos);
}

TEST(Report, JsonCarriesTheRequiredFieldsPerResult) {
  const std::string js = render_json(info(), "stage1", sample_results());
  for (const char* expected :
       {"\"kernel\": \"stage1/sgemm/01_naive\"", "\"op\": \"sgemm\"", "\"dtype\": \"f32\"",
        "\"shape\": \"4096x4096x4096\"", "\"tflops\": 48.450", "\"gbps\": 100.0",
        "\"baseline\": \"cuBLAS SGEMM (FP32, pedantic)\"", "\"pct_of_baseline\": 95.00",
        "\"pct_of_ceiling\":", "\"correct\": true", "\"correct\": false", "\"commit\": \"0123456789ab\""})
    EXPECT_NE(js.find(expected), std::string::npos) << "missing " << expected << " in\n" << js;
  // a failed kernel has no timing
  const auto failed = js.find("02_broken");
  ASSERT_NE(failed, std::string::npos);
  EXPECT_NE(js.find("\"tflops\": null", failed), std::string::npos);
}

// A kernel's note (KernelEntry::note: the GEMM entry names the path it took) reaches the Details
// table, in a column of its own, and the JSON; an op whose kernels say nothing keeps its columns.
TEST(Report, AKernelsNoteHasItsOwnColumnAndJsonField) {
  std::vector<Result> results = sample_results();
  const std::string plain = render_markdown(info(), "stage1", results);
  EXPECT_EQ(plain.find("rel. error | note |"), std::string::npos) << "no note, no column:\n" << plain;
  EXPECT_NE(plain.find("| rel. error |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"),
            std::string::npos) << plain;
  EXPECT_NE(render_json(info(), "stage1", results).find("\"note\": \"\""), std::string::npos);

  results[1].note = "path: cuBLAS GemmEx (fallback: M <= 64 | K % 8 != 0)";
  const std::string md = render_markdown(info(), "stage1", results);
  EXPECT_NE(md.find("| rel. error | note |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"),
            std::string::npos) << md;
  const auto at = md.find("| `01_naive` | 4096³ f32 | ok |");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(line.find("| path: cuBLAS GemmEx (fallback: M <= 64 \\| K % 8 != 0) |"), std::string::npos)
      << "the note, '|' escaped, in the last cell: " << line;
  // Every row of the op has the column: the baseline's and the failed kernel's cells are empty.
  for (const char* row : {"| cuBLAS SGEMM (FP32, pedantic) | 4096³ f32 | ok |", "| `02_broken` | 4096³ f32 | FAILED |"}) {
    const auto begin = md.find(row);
    ASSERT_NE(begin, std::string::npos) << row << " in\n" << md;
    const std::string other = md.substr(begin, md.find('\n', begin) - begin);
    EXPECT_EQ(other.substr(other.size() - 4), "|  |") << other;
  }
  const std::string js = render_json(info(), "stage1", results);
  EXPECT_NE(js.find("\"note\": \"path: cuBLAS GemmEx (fallback: M <= 64 | K % 8 != 0)\""), std::string::npos) << js;
}

TEST(Report, WritesOneMarkdownAndOneJsonPerGroup) {
  const auto dir = std::filesystem::temp_directory_path() / "kc_report_test";
  std::filesystem::remove_all(dir);
  const auto written = write_reports(dir.string(), info(), sample_results());
  EXPECT_EQ(written.size(), 4u);  // stage1 and stage2, .md and .json each
  for (const char* name : {"stage1.md", "stage1.json", "stage2.md", "stage2.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / name)) << name;
  std::filesystem::remove_all(dir);
}

TEST(Options, ParsesKcFlagsAndLeavesBenchmarkFlags) {
  std::vector<std::string> args{"kc-bench", "--filter", "stage1", "--shapes=4096x4096x4096,128x8192x8192",
                                "--benchmark_repetitions=3", "--markdown", "--seed=7",
                                "--max-samples=20", "--param", "beta=0.5", "--param=causal=1",
                                "--dtype=bf16,f16", "--seeds", "3", "--allow-dirty"};
  const Options o = parse_options(args);
  EXPECT_EQ(o.filter, "stage1");
  EXPECT_EQ(o.shapes, (std::vector<std::string>{"4096x4096x4096", "128x8192x8192"}));
  EXPECT_EQ(o.markdown_dir, std::optional<std::string>("auto"));
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.timing.max_samples, 20);
  EXPECT_EQ(o.params, (ParamValues{{"beta", 0.5}, {"causal", 1.0}}));
  EXPECT_EQ(o.dtypes, (std::vector<DType>{DType::bf16, DType::f16}));
  EXPECT_EQ(o.seeds, 3);
  EXPECT_TRUE(o.allow_dirty);
  EXPECT_EQ(args, (std::vector<std::string>{"kc-bench", "--benchmark_repetitions=3"}));
  EXPECT_TRUE(o.paired_baseline) << "kernels are timed alongside their baseline by default";
  std::vector<std::string> solo{"kc-bench", "--solo"};
  EXPECT_FALSE(parse_options(solo).paired_baseline);
}

TEST(Options, MarkdownFolderIsOptional) {
  std::vector<std::string> spaced{"kc-bench", "--markdown", "out/dir", "--filter=x"};
  EXPECT_EQ(parse_options(spaced).markdown_dir, std::optional<std::string>("out/dir"));
  std::vector<std::string> joined{"kc-bench", "--markdown=out/dir"};
  EXPECT_EQ(parse_options(joined).markdown_dir, std::optional<std::string>("out/dir"));
  std::vector<std::string> bare{"kc-bench", "--markdown", "--filter=x"};
  const Options o = parse_options(bare);
  EXPECT_EQ(o.markdown_dir, std::optional<std::string>("auto"));
  EXPECT_EQ(o.filter, "x");
}

TEST(Options, RejectsWhatItCannotUse) {
  const auto parse = [](std::vector<std::string> args) { return parse_options(args); };
  EXPECT_THROW(parse({"kc-bench", "--shapes=4096x"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--seed=abc"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--filter"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--frobnicate"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--min-samples=10", "--max-samples=5"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--dtype=bf17"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--param=causal"}), Error);
  EXPECT_THROW(parse({"kc-bench", "--seeds=0"}), Error);
  // The old scalar flags say what replaced them.
  try {
    parse({"kc-bench", "--beta=0.5"});
    FAIL() << "--beta was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--param"), std::string::npos) << e.what();
  }
}

TEST(Options, DirtyTreesAreRecognized) {
  EXPECT_TRUE(is_dirty_commit("3f2a9c1d0b7e-dirty"));
  EXPECT_FALSE(is_dirty_commit("3f2a9c1d0b7e"));
  EXPECT_FALSE(is_dirty_commit("unknown"));
}

TEST(Report, ColumnsShowTheDtypeWhenAnOpHasSeveralAndTheParametersOffTheirDefaults) {
  std::vector<Result> results;
  Result bf16 = sample_results()[1];
  bf16.dtype = "bf16";
  bf16.label = "4096x4096x4096 bf16";
  Result f32 = sample_results()[1];
  f32.params = {{"alpha", 1.5, false}, {"beta", 0.0, true}};
  f32.label = "4096x4096x4096 f32 alpha=1.5";
  results.push_back(bf16);
  results.push_back(f32);
  const std::string md = render_markdown(info(), "stage1", results);
  EXPECT_NE(md.find("| 4096³ bf16 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 4096³ f32 alpha=1.5 |"), std::string::npos) << md;
  const std::string js = render_json(info(), "stage1", results);
  EXPECT_NE(js.find("\"params\": {\"alpha\": 1.500000, \"beta\": 0.000000}"), std::string::npos) << js;
  EXPECT_NE(js.find("\"dtype\": \"bf16\""), std::string::npos) << js;
}

}  // namespace
}  // namespace kc::bench

namespace kc::bench {
namespace {

TEST(Peers, ParsesTheTsvAndExplainsBadLines) {
  const auto timings = parse_peer_timings(
      "op\tdtype\tshape\tpeer\tmedian_ms\n# comment\nrmsnorm\tbf16\t32768x4096\ttorch.compile\t0.125\n");
  ASSERT_EQ(timings.size(), 1u);
  EXPECT_EQ(timings[0].op, "rmsnorm");
  EXPECT_EQ(timings[0].dtype, "bf16");
  EXPECT_EQ(timings[0].shape, "32768x4096");
  EXPECT_EQ(timings[0].peer, "torch.compile");
  EXPECT_DOUBLE_EQ(timings[0].median_ms, 0.125);
  EXPECT_THROW(parse_peer_timings("rmsnorm\tbf16\t32768x4096\t0.1\n"), Error);
  EXPECT_THROW(parse_peer_timings("rmsnorm\tbf16\t32768x4096\ttorch\tfast\n"), Error);
  EXPECT_THROW(parse_peer_timings("rmsnorm\tbf16\t32768x4096\ttorch\t-1\n"), Error);
  EXPECT_THROW(parse_peer_timings("rmsnorm\tbfloat\t32768x4096\ttorch\t1\n"), Error);
}

TEST(Peers, AnOptionalSixthColumnNamesTheParameters) {
  const auto timings = parse_peer_timings(
      "attention_fwd\tbf16\t4x16x16x4096x4096x128\ttorch SDPA (FA2)\t1.5\tcausal=1\n"
      "attention_fwd\tbf16\t4x16x16x4096x4096x128\ttorch SDPA (FA2)\t2.5\t\n"
      "rmsnorm\tbf16\t32768x4096\ttorch eager\t0.5\n");
  ASSERT_EQ(timings.size(), 3u);
  EXPECT_EQ(timings[0].params, "causal=1");
  EXPECT_EQ(timings[0].peer, "torch SDPA (FA2)");
  EXPECT_EQ(timings[1].params, "");
  EXPECT_EQ(timings[2].params, "");
  EXPECT_THROW(parse_peer_timings("rmsnorm\tbf16\t32768x4096\ttorch\t1\tcausal=1\textra\n"), Error);
}

TEST(Peers, PeerRowsAppearBesideTheBaselineInTheTables) {
  std::vector<Result> results = sample_results();
  Result peer = results[0];
  peer.kernel = "torch.compile";
  peer.is_baseline = false;
  peer.is_peer = true;
  peer.peer_outside = true;
  results.push_back(peer);
  const std::string md = render_markdown(info(), "stage1", results);
  EXPECT_NE(md.find("| peer | *torch.compile* |"), std::string::npos) << md;
  const std::string js = render_json(info(), "stage1", results);
  EXPECT_NE(js.find("\"is_peer\": true"), std::string::npos) << js;
}

}  // namespace
}  // namespace kc::bench
