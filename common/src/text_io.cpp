#include "kc/common/text_io.hpp"

#include <charconv>
#include <cstdlib>
#include <fstream>

#include "kc/common/error.hpp"

namespace kc {

std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else
          out += c;
    }
  }
  return out;
}

std::string json_string(const std::string& text) { return "\"" + json_escape(text) + "\""; }

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  require(static_cast<bool>(file), "cannot write '{}'", path);
  file << text;
  file.close();
  require(static_cast<bool>(file), "writing '{}' failed (disk full?)", path);
}

int parse_int(const std::string& flag, const std::string& text) {
  int value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(!text.empty() && status == std::errc() && end == text.data() + text.size(),
          "{} expects a whole number, got '{}'", flag, text);
  return value;
}

double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  require(!text.empty() && end == text.c_str() + text.size(), "{} expects a number, got '{}'",
          flag, text);
  return value;
}

bool parse_flag_values(int argc, char** argv, const std::string& usage,
                       const std::map<std::string, std::function<void(const std::string&)>>& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    const auto handler = flags.find(flag);
    require(handler != flags.end(), "unknown flag '{}'\n{}", flag, usage);
    require(i + 1 < argc, "{} needs a value\n{}", flag, usage);
    handler->second(argv[++i]);
  }
  return true;
}

}  // namespace kc
