// kc/common/text_io.hpp — the small text chores of kc's command-line tools (kc-bench and the
// tuners): flags, numbers, JSON strings, files. Errors are kc::Error with a sentence to act on.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace kc {

// `text` with JSON's special characters escaped (no surrounding quotes).
std::string json_escape(const std::string& text);
// `text` as a quoted JSON string.
std::string json_string(const std::string& text);

// Writes `text` to `path`, replacing the file; throws kc::Error when it cannot.
void write_text_file(const std::string& path, const std::string& text);

// The whole of `text` as a number; throws kc::Error naming `flag` otherwise.
int parse_int(const std::string& flag, const std::string& text);
double parse_double(const std::string& flag, const std::string& text);

// Parses "--flag value" pairs: `flags` maps each flag to what to do with its value. Returns false
// when --help or -h was given (print the usage then); throws kc::Error, with `usage`, on an unknown
// flag or a flag without its value.
bool parse_flag_values(int argc, char** argv, const std::string& usage,
                       const std::map<std::string, std::function<void(const std::string&)>>& flags);

}  // namespace kc
