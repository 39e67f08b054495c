// The tuners' shared driver (kc/common/tuning.hpp): ranking and option parsing, host code only.
#include <gtest/gtest.h>

#include <cmath>

#include "kc/common/error.hpp"
#include "kc/common/tuning.hpp"

namespace kc::tuning {
namespace {

TEST(Tuning, GeometricMeanOfPercentOfBaselineNeedsEveryProblem) {
  const std::vector<Measurement> measurements = {
      {"a", -1, 1.0, 0, 1.0, 100.0, 0}, {"a", 0, 1.0, 0, 1.0, 50.0, 0}, {"b", 0, 1.0, 0, 1.0, 200.0, 0},
      {"a", 1, 1.0, 0, 1.0, 120.0, 0},  // candidate 1 was not measured on "b"
  };
  const std::vector<double> g = geometric_mean_pct(measurements, 3, {"a", "b"});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_NEAR(g[0], 100.0, 1e-9);  // sqrt(50 x 200)
  EXPECT_EQ(g[1], 0.0);
  EXPECT_EQ(g[2], 0.0);
  EXPECT_EQ(best_of(g), 0);
  EXPECT_EQ(best_of({0.0, 0.0}), -1);
  EXPECT_EQ(best_of({90.0, 101.5, 99.0}), 1);
}

TEST(Tuning, OptionsTakeTheSharedFlagsAndTheToolsOwn) {
  std::string only;
  const char* argv[] = {"tool", "--json", "out.json", "--max-samples", "12", "--class", "large"};
  const auto options = parse_options(7, const_cast<char**>(argv), "usage", {"", 10, 25.0},
                                     {{"--class", [&](const std::string& v) { only = v; }}});
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->json_path, "out.json");
  EXPECT_EQ(options->max_samples, 12);
  EXPECT_EQ(options->target_ms, 25.0);
  EXPECT_EQ(options->timing().max_samples, 12);
  EXPECT_EQ(only, "large");
  const char* bad[] = {"tool", "--max-samples", "2"};
  EXPECT_THROW(parse_options(3, const_cast<char**>(bad), "usage", {}), Error);
}

}  // namespace
}  // namespace kc::tuning
