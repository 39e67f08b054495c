// engine/strict_json.hpp (private to the readers) — JSON parsing that refuses what JSON allows
// but a model file must not have.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kc::engine::detail {

// Parses `text` (from the file `path`, starting at byte `text_offset` of it). Throws kc::Error
// "<path>: at byte <n>: ..." for a syntax error, and for a key that appears twice in one object:
// JSON parsers usually keep one of the two silently, and a safetensors header or a config with
// two entries of one name is ambiguous.
nlohmann::json parse_strict_json(std::string_view text, const std::string& path,
                                 std::uint64_t text_offset);

// A JSON value's kind as a learner would say it: "a string", "an array", "null", "a number" ...
std::string json_kind(const nlohmann::json& value);

}  // namespace kc::engine::detail
