// The command-line chores shared by kc-bench and the tuners.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kc/common/error.hpp"
#include "kc/common/text_io.hpp"

namespace kc {
namespace {

bool parse(std::vector<std::string> args, std::map<std::string, std::string>& seen) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parse_flag_values(static_cast<int>(argv.size()), argv.data(), "usage: tool [--a X]",
                           {{"--a", [&](const std::string& v) { seen["a"] = v; }},
                            {"--b", [&](const std::string& v) { seen["b"] = v; }}});
}

TEST(TextIo, FlagValuesAreDispatchedAndHelpStops) {
  std::map<std::string, std::string> seen;
  EXPECT_TRUE(parse({"tool", "--a", "1", "--b", "two"}, seen));
  EXPECT_EQ(seen["a"], "1");
  EXPECT_EQ(seen["b"], "two");
  EXPECT_FALSE(parse({"tool", "--help"}, seen));
  try {
    parse({"tool", "--c", "1"}, seen);
    FAIL() << "expected kc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown flag '--c'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("usage:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse({"tool", "--a"}, seen), Error);  // no value
}

TEST(TextIo, NumbersMustBeWhole) {
  EXPECT_EQ(parse_int("--n", "42"), 42);
  EXPECT_DOUBLE_EQ(parse_double("--x", "2.5e1"), 25.0);
  for (const char* bad : {"", "4x", "x", "1.5"}) EXPECT_THROW(parse_int("--n", bad), Error) << bad;
  for (const char* bad : {"", "1.5ms", "fast"}) EXPECT_THROW(parse_double("--x", bad), Error) << bad;
}

TEST(TextIo, WritesFilesAndExplainsFailures) {
  const auto path = std::filesystem::temp_directory_path() / "kc_text_io_test.txt";
  write_text_file(path.string(), "hello\n");
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), "hello\n");
  std::filesystem::remove(path);
  EXPECT_THROW(write_text_file("/nonexistent-kc-dir/x.json", "{}"), Error);
}

}  // namespace
}  // namespace kc
