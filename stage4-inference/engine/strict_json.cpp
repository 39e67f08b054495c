#include "strict_json.hpp"

#include <set>
#include <vector>

#include "file_error.hpp"

namespace kc::engine::detail {

namespace {
// Model files nest a few levels (a tokenizer.json about six). The limit keeps a crafted file from
// building a value so deep that the recursive parts of the JSON library (dump(), used in error
// messages) exhaust the stack.
constexpr int kMaxJsonDepth = 64;
}  // namespace

nlohmann::json parse_strict_json(std::string_view text, const std::string& path,
                                 std::uint64_t text_offset) {
  // The parser reports keys through its callback; one set of seen keys per open object.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const nlohmann::json::parser_callback_t track_keys =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        switch (event) {
          case nlohmann::json::parse_event_t::object_start:
          case nlohmann::json::parse_event_t::array_start:
            if (depth >= kMaxJsonDepth)
              throw_file_error(path, text_offset,
                               fmt::format("the JSON nests objects and arrays more than {} deep; "
                                           "no model file needs that many",
                                           kMaxJsonDepth));
            if (event == nlohmann::json::parse_event_t::object_start) open_objects.emplace_back();
            break;
          case nlohmann::json::parse_event_t::object_end: open_objects.pop_back(); break;
          case nlohmann::json::parse_event_t::key:
            if (!open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty())
              duplicate = parsed.get<std::string>();
            break;
          default: break;
        }
        return true;
      };
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text.begin(), text.end(), track_keys);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1 and points just past the character that could not be parsed.
    const std::uint64_t at = text_offset + (e.byte > 0 ? e.byte - 1 : 0);
    throw_file_error(path, at, fmt::format("invalid JSON: {}", e.what()));
  } catch (const nlohmann::json::exception& e) {
    // The parser's other errors, e.g. out_of_range for a number beyond a double (1e309).
    throw_file_error(path, text_offset, fmt::format("invalid JSON: {}", e.what()));
  }
  if (!duplicate.empty())
    throw_file_error(path, text_offset,
                     fmt::format("the JSON has the key \"{}\" twice in one object", duplicate));
  return value;
}

std::string json_kind(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a floating-point number";
    default: return "an unusual JSON value";
  }
}

}  // namespace kc::engine::detail
