// kc-bench end to end on a GPU: the negative controls are reported FAILED and never timed, and a
// real kernel produces the Markdown and JSON tables. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "kc/common/device.hpp"
#include "kc/testing/negative_controls.hpp"
#include "support/gpu_test.hpp"
#include "support/run_program.hpp"

namespace {

using kc::testing::ProgramRun;
using kc::testing::run_kc_bench;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The line of kc-bench's JSON (one result a line) that holds every one of `fields`, each an exact
// `"key": value` text; "" when none does.
std::string json_row(const std::string& json, const std::vector<std::string>& fields) {
  for (std::size_t begin = 0; begin < json.size();) {
    const std::size_t end = std::min(json.find('\n', begin), json.size());
    const std::string line = json.substr(begin, end - begin);
    if (std::all_of(fields.begin(), fields.end(),
                    [&](const std::string& field) { return line.find(field) != std::string::npos; }))
      return line;
    begin = end + 1;
  }
  return "";
}

// One kc-bench run of negative controls: the controls whose id holds `ids` (the first run in
// kControlRuns whose `ids` a control's id holds is the one that reports it), on a problem where
// their flaws show.
struct ControlRun {
  const char* folder;  // under the temporary directory
  const char* ids;     // a piece of the controls' ids
  const char* args;    // kc-bench's arguments besides --include-negative-controls and the output
  bool hopper_only;    // WGMMA kernels: compute capability 9.0 only
};

// The most specific pieces first: a control goes to the first run whose piece its id holds.
const ControlRun kControlRuns[] = {
    // The one control of the FP8 per-tensor mode (the promotion window not restarted), scaling=0.
    {"kc_bench_negative_fp8_tensor", "/fp8_gemm/nc_promotion_window",
     "--filter 'fp8_gemm/nc_promotion_window' --shapes 256x256x8192 --param scaling=0", true},
    // The FP8 GEMM controls with block scales and K = 8192: long sums for the missed promotion,
    // several K blocks for the scale mistakes.
    {"kc_bench_negative_fp8", "/fp8_gemm/", "--filter 'fp8_gemm/nc_' --shapes 256x256x8192 --param scaling=1", true},
    // The FP8 grouped GEMM's control on six experts padded to 8, 4, 128, 4, 0 and 16 rows: experts
    // other than the last have rows, so the neighbour's weight scales show.
    {"kc_bench_negative_fp8_grouped", "/fp8_grouped_gemm/",
     "--filter 'fp8_grouped_gemm/nc_' --shapes 6x264x272 --param tokens=150 --param skew=3 --param routing_seed=2 "
     "--param row_align=4",
     true},
    // The controls of the decode op with RoPE and the cache write (rungs 06-09) on a ragged batch
    // with four new tokens a sequence, as their GPU tests (negative_controls_test.cpp) run them.
    {"kc_bench_negative_decode_rope", "/attention_decode_paged_rope/",
     "--filter 'attention_decode_paged_rope/nc_' --shapes 7x32x8x4x300x128 --param lengths=1", false},
    // The INT8 GEMM controls at K = 8192: the dropped last K step and the swapped scales.
    {"kc_bench_negative_int8", "/int8_gemm", "--filter 'int8_gemm.*/nc_' --shapes 256x256x8192", true},
    // The small-M controls where K is split (M <= 64 and a K long enough for four splits of the 32
    // column blocks of N = 4096): rung 14's last CTA adding one split twice, and rung 16's cluster
    // adding rank 0's tile twice (Hopper).
    {"kc_bench_negative_cluster_split", "/nc_cluster_split",
     "--filter 'hgemm/nc_cluster_split' --shapes 64x4096x4096", true},
    {"kc_bench_negative_small_m", "/nc_split_k_partials", "--filter 'hgemm/nc_split_k_partials' --shapes 64x4096x4096",
     false},
    // The GGUF quantize control (nibbles swapped) on q4_0 blocks, odd rows: a two-dimensional shape.
    {"kc_bench_negative_quantize", "/quantize_gguf/", "--filter 'quantize_gguf/nc_' --shapes 17x4128 --param ggml_type=2",
     false},
    // Rung 07's flawed split shows only where its plan splits the last wave along K (at least 16 K
    // steps a piece): a dozen tiles and K = 4096 (64 steps) on any GPU of 24 SMs or more.
    {"kc_bench_negative_grouped_split", "/grouped_gemm/nc_split_pieces_added_twice",
     "--filter 'grouped_gemm/nc_split_pieces_added_twice' --shapes 6x264x4096 --param tokens=150 --param skew=3 "
     "--param routing_seed=2",
     false},
    // The int4 GEMV's controls: the batch rung's at G = 128 on 33 rows (tiles of rows 8 apart), then
    // rung 01's four at G = 32 (a chunk of 128 weights holds four groups, so the next group's scales
    // exist).
    {"kc_bench_negative_int4_batch", "/gemv_int4/nc_batch_",
     "--filter 'gemv_int4/nc_batch_swapped_zero_points' --shapes 33x129x4224 --param group_size=128", false},
    {"kc_bench_negative_int4", "/gemv_int4/",
     "--filter 'gemv_int4/nc_(swapped_nibbles|next_group_scales|zero_point_ignored|scale_applied_twice)' "
     "--shapes 4x129x512 --param group_size=32",
     false},
    // The grouped GEMM controls on six experts with 5, 1, 126, 2, 0 and 16 rows (an empty expert
    // between two with rows: every routing flaw shows).
    {"kc_bench_negative_grouped", "/grouped_gemm/",
     "--filter 'grouped_gemm/nc_' --shapes 6x2049x264 --param tokens=150 --param skew=3 --param routing_seed=2", false},
    // The paged-decode controls on a ragged batch of 7 sequences (an empty one, lengths 1, 15, 17,
    // 16, 257: every flaw shows) with four new tokens each.
    {"kc_bench_negative_decode", "/attention_decode_paged/",
     "--filter 'attention_decode_paged/nc_' --shapes 7x32x8x4x257x128 --param lengths=1", false},
    // The attention controls on an attention problem (six dimensions, causal: the mask control
    // needs the mask).
    {"kc_bench_negative_attention", "/attention_fwd/",
     "--filter 'attention_fwd/nc_' --shapes 2x4x1x77x1000x64 --param causal=1", false},
    // Everything else (the GEMM and memory-bound controls) on a three-dimensional shape.
    {"kc_bench_negative", "/", "--filter 'nc_' --shapes 127x129x131", false},
};

TEST(KcBenchGpu, NegativeControlsAreReportedFailedAndNeverTimed) {
  KC_SKIP_WITHOUT_GPU();
  const bool hopper = kc::query_device().compute_capability() == 90;
  std::vector<std::string> reports(std::size(kControlRuns));  // each run's JSON ("" where not run)
  for (std::size_t i = 0; i < std::size(kControlRuns); ++i) {
    const ControlRun& run = kControlRuns[i];
    if (run.hopper_only && !hopper) continue;
    const auto folder = std::filesystem::temp_directory_path() / run.folder;
    std::filesystem::remove_all(folder);
    const ProgramRun r = run_kc_bench(std::string("--include-negative-controls ") + run.args +
                                      " --max-samples 5 --allow-dirty --markdown " + folder.string());
    EXPECT_EQ(r.exit_code, 1) << run.folder << ": a failed kernel must fail the run\n" << r.output;
    reports[i] = read_file(folder / "negative-controls.json");
    std::filesystem::remove_all(folder);
  }
  for (const auto& control : kc::testing::negative_controls()) {
    // The int4 quantize's control differs from the reference only on exact ties of w / scale, which
    // the conformance data plants and random bench operands do not hold: the harness test
    // NegativeControls.EveryControlFailsSomeConformanceProblem shows it failing.
    if (control.id.find("/quantize_int4/nc_without_tie_path") != std::string::npos) continue;
    std::size_t i = 0;
    while (control.id.find(kControlRuns[i].ids) == std::string::npos) ++i;  // the last run takes every id
    if (kControlRuns[i].hopper_only && !hopper) continue;
    const std::string& text = reports[i];
    const auto at = text.find("\"kernel\": \"" + control.id + "\"");
    if (at == std::string::npos) {  // every control is looked at, each missing one named
      ADD_FAILURE() << control.id << " missing from the report of " << kControlRuns[i].folder << "\n" << text;
      continue;
    }
    const std::string row = text.substr(at, text.find('\n', at) - at);
    EXPECT_NE(row.find("\"status\": \"FAILED\""), std::string::npos) << row;
    EXPECT_NE(row.find("\"tflops\": null"), std::string::npos) << "a FAILED kernel was timed: " << row;
  }
}

TEST(KcBenchGpu, NaiveRungProducesTablesAgainstCublas) {
  KC_SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / "kc_bench_naive";
  std::filesystem::remove_all(dir);
  const ProgramRun r = run_kc_bench("--filter stage1/sgemm/01_naive --shapes 512x384x256 --max-samples 5 "
                             "--allow-dirty --markdown " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = read_file(dir / "stage1.md");
  const std::string json = read_file(dir / "stage1.json");
  EXPECT_NE(md.find("01_naive"), std::string::npos) << md;
  EXPECT_NE(md.find("cuBLAS SGEMM"), std::string::npos) << md;
  const auto at = json.find("\"kernel\": \"stage1/sgemm/01_naive\"");
  ASSERT_NE(at, std::string::npos) << json;
  const std::string row = json.substr(at, json.find('\n', at) - at);
  EXPECT_NE(row.find("\"status\": \"ok\""), std::string::npos) << row;
  EXPECT_EQ(row.find("\"pct_of_baseline\": null"), std::string::npos) << "compared with cuBLAS: " << row;
  EXPECT_EQ(row.find("\"tflops\": null"), std::string::npos) << row;
  std::filesystem::remove_all(dir);
}

// The GEMM entry's rows say which path it took: rung 12 at M = 1, cuBLAS with the reason where it
// falls back (1 < M <= 64; K % 8 != 0), in the JSON's "note" and the Details table's note column.
TEST(KcBenchGpu, TheGemmEntryNamesItsPathOnEachRow) {
  KC_SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / "kc_bench_gemm_entry";
  std::filesystem::remove_all(dir);
  const ProgramRun r = run_kc_bench("--filter stage3/hgemm/13_entry --shapes 1x4096x4096,32x4096x4096,127x129x131 "
                                    "--max-samples 5 --allow-dirty --markdown " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = read_file(dir / "stage3-gemm-entry.json");
  const auto row_of = [&](const std::string& shape) {
    return json_row(json, {"\"kernel\": \"stage3/hgemm/13_entry\"", "\"shape\": \"" + shape + "\""});
  };
  EXPECT_NE(row_of("1x4096x4096").find("\"note\": \"path: stage3/hgemm/12_small_m_gemv\""), std::string::npos)
      << row_of("1x4096x4096");
  EXPECT_NE(row_of("32x4096x4096").find("\"note\": \"path: cuBLAS GemmEx (fallback: M <= 64"), std::string::npos)
      << row_of("32x4096x4096");
  EXPECT_NE(row_of("127x129x131").find("\"note\": \"path: cuBLAS GemmEx (fallback: K % 8 != 0)\""),
            std::string::npos) << row_of("127x129x131");
  const std::string md = read_file(dir / "stage3-gemm-entry.md");
  EXPECT_NE(md.find("| rel. error | note |"), std::string::npos) << md;
  EXPECT_NE(md.find("path: stage3/hgemm/12_small_m_gemv |"), std::string::npos) << md;
  std::filesystem::remove_all(dir);
}

// One name, several ops: rmsnorm and residual_rmsnorm share the problem 8192x4096 bf16 and the
// baseline "copy of the same bytes (cudaMemcpy)", but residual_rmsnorm's copy moves twice the bytes
// (x and residual in, sum and y out, against x in and y out). Each op's copy row must be timed on
// its own samples: pooled under one key, the two medians came out alike and residual_rmsnorm's
// copy read above the DRAM peak.
TEST(KcBenchGpu, BaselinesOfDifferentOpsOnTheSameProblemAreTimedApart) {
  KC_SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / "kc_bench_copy_rows";
  std::filesystem::remove_all(dir);
  const ProgramRun r = run_kc_bench("--filter '^stage2/(rmsnorm|residual_rmsnorm)/01_' --shapes 8192x4096 "
                                    "--dtype bf16 --max-samples 20 --allow-dirty --markdown " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = read_file(dir / "stage2.json");
  const auto copy_ms = [&](const std::string& op) {
    const std::string row = json_row(json, {"\"is_baseline\": true", "\"op\": \"" + op + "\""});
    if (!row.empty()) return std::stod(row.substr(row.find("\"time_ms\": ") + 11));
    ADD_FAILURE() << "no copy row of " << op << " in\n" << json;
    return 0.0;
  };
  const double rmsnorm = copy_ms("rmsnorm"), residual = copy_ms("residual_rmsnorm");
  ASSERT_GT(rmsnorm, 0.0);
  // Twice the bytes: about twice the time (1.6 leaves room for the copy's fixed cost).
  EXPECT_GT(residual / rmsnorm, 1.6) << "rmsnorm copy " << rmsnorm << " ms, residual_rmsnorm copy " << residual << " ms";
  std::filesystem::remove_all(dir);
}

TEST(KcBenchGpu, RefusedShapesAreExplainedNotFailed) {
  KC_SKIP_WITHOUT_GPU();
  const ProgramRun r = run_kc_bench("--filter stage1/sgemm/01_naive --shapes 70000x70000x2 --max-samples 5");
  EXPECT_EQ(r.exit_code, 0) << "refusing an unsupported shape is not a failure\n" << r.output;
  EXPECT_NE(r.output.find("refused"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("32-bit"), std::string::npos) << r.output;
}

// --param sets a parameter on the selected ops that have it: one run checks rung 09 of the GGUF GEMV
// (layout=3) beside hgemm rung 14, which has no `layout`; a parameter no selected op has is an error.
TEST(KcBenchGpu, AParameterIsSetOnTheSelectedOpsThatHaveIt) {
  KC_SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / "kc_bench_param_per_op";
  std::filesystem::remove_all(dir);
  const ProgramRun both = run_kc_bench("--filter 'stage3/(gemv_gguf/09_batch|hgemm/14_)' --shapes 16x256x512 "
                                       "--param layout=3 --max-samples 5 --allow-dirty --markdown " + dir.string());
  ASSERT_EQ(both.exit_code, 0) << both.output;
  const std::string quant = read_file(dir / "stage3-quant.json"), gemm = read_file(dir / "stage3-gemm.json");
  const std::string ok = "\"status\": \"ok\"";
  EXPECT_NE(json_row(quant, {"\"kernel\": \"stage3/gemv_gguf/09_batch\"", "\"layout\": 3.000000", ok}), "") << quant;
  EXPECT_NE(json_row(gemm, {"\"kernel\": \"stage3/hgemm/14_small_m_weights_as_a\"", ok}), "") << gemm;
  std::filesystem::remove_all(dir);
  const ProgramRun none = run_kc_bench("--filter stage3/hgemm/14_ --shapes 16x256x512 --param layout=3 --check-only");
  EXPECT_NE(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("--param layout: none of the selected ops (hgemm) has that parameter"), std::string::npos)
      << none.output;
}

}  // namespace
