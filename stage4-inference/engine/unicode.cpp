// The Unicode helpers of the tokenizer. The category tables are generated (see
// scripts/gen_unicode_tables.py); this file only searches them and handles UTF-8.
#include "unicode.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "kc/common/error.hpp"

namespace kc::engine::detail {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "unicode_tables.inc"

template <std::size_t N>
bool in_table(const CodePointRange (&table)[N], char32_t code_point) {
  // The first range whose last code point is >= code_point; inside it or in none.
  const CodePointRange* end = table + N;
  const CodePointRange* it = std::lower_bound(
      table, end, code_point,
      [](const CodePointRange& range, char32_t value) { return range.last < value; });
  return it != end && it->first <= code_point;
}

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

const char* unicode_tables_version() { return kUnicodeVersion; }

bool is_letter(char32_t code_point) {
  if (code_point < 0x80)
    return (code_point >= 'a' && code_point <= 'z') || (code_point >= 'A' && code_point <= 'Z');
  return in_table(kLetterRanges, code_point);
}

bool is_number(char32_t code_point) {
  if (code_point < 0x80) return code_point >= '0' && code_point <= '9';
  return in_table(kNumberRanges, code_point);
}

bool is_whitespace(char32_t code_point) { return in_table(kWhitespaceRanges, code_point); }

Utf8Step utf8_step(std::string_view bytes, std::size_t position) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(position);
  if (lead < 0x80) return {1, true, false};
  // The expected length and the allowed range of the second byte (Unicode table 3-7), which
  // excludes overlong forms, surrogates and code points past U+10FFFF.
  std::size_t length = 0;
  unsigned char second_low = 0x80, second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return {1, false, false};  // a continuation byte or a byte UTF-8 never uses
  }
  std::size_t consumed = 1;
  for (; consumed < length; ++consumed) {
    const std::size_t at = position + consumed;
    if (at >= bytes.size()) return {consumed, false, true};
    const unsigned char next = byte(at);
    const bool ok = consumed == 1 ? (next >= second_low && next <= second_high)
                                  : is_continuation(next);
    if (!ok) return {consumed, false, false};
  }
  return {length, true, false};
}

DecodedText decode_utf8(std::string_view text, std::string_view what) {
  DecodedText decoded;
  decoded.code_points.reserve(text.size());
  decoded.offsets.reserve(text.size() + 1);
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Step step = utf8_step(text, i);
    if (!step.valid)
      throw Error(fmt::format("{}: the text is not valid UTF-8 at byte {} (byte 0x{:02X}); the "
                              "tokenizer encodes Unicode text only",
                              what, i, static_cast<unsigned char>(text[i])));
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
    char32_t code_point = 0;
    switch (step.length) {
      case 1: code_point = byte(0); break;
      case 2: code_point = (byte(0) & 0x1Fu) << 6 | (byte(1) & 0x3Fu); break;
      case 3: code_point = (byte(0) & 0x0Fu) << 12 | (byte(1) & 0x3Fu) << 6 | (byte(2) & 0x3Fu); break;
      default:
        code_point = (byte(0) & 0x07u) << 18 | (byte(1) & 0x3Fu) << 12 | (byte(2) & 0x3Fu) << 6 |
                     (byte(3) & 0x3Fu);
    }
    decoded.code_points.push_back(code_point);
    decoded.offsets.push_back(i);
    i += step.length;
  }
  decoded.offsets.push_back(text.size());
  return decoded;
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Step step = utf8_step(bytes, i);
    if (step.valid)
      out.append(bytes.substr(i, step.length));
    else
      append_utf8(out, U'\uFFFD');
    i += step.length;
  }
  return out;
}

}  // namespace kc::engine::detail
