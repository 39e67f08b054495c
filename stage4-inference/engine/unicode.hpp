// engine/unicode.hpp (private to the tokenizer) — the little Unicode the tokenizer needs: UTF-8
// decoding with byte offsets, the character classes of the pre-tokenizer regexes (\p{L}, \p{N},
// \s) from generated tables, and UTF-8 repair the way Hugging Face tokenizers does it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kc::engine::detail {

// The Unicode version of the generated tables (engine/unicode_tables.inc).
const char* unicode_tables_version();

bool is_letter(char32_t code_point);      // general category L*
bool is_number(char32_t code_point);      // general category N*
bool is_whitespace(char32_t code_point);  // \s as Oniguruma defines it (White_Space)

// Text decoded to code points; offsets[i] is the byte where code point i starts, and
// offsets[size()] is the byte length, so code points [a, b) are bytes [offsets[a], offsets[b]).
struct DecodedText {
  std::vector<char32_t> code_points;
  std::vector<std::size_t> offsets;
};

// Decodes UTF-8; throws kc::Error naming `what` and the byte offset of the first invalid sequence
// (the tokenizer encodes text, and text is valid UTF-8).
DecodedText decode_utf8(std::string_view text, std::string_view what);

// Appends the UTF-8 encoding of one code point.
void append_utf8(std::string& out, char32_t code_point);

// How the bytes at `position` begin: `length` bytes form a valid character, or `length` bytes
// (at least one) are the maximal ill-formed subpart that U+FFFD replaces; `truncated` says the
// bytes are a valid character's beginning cut off by the end of the input.
struct Utf8Step {
  std::size_t length = 0;
  bool valid = false;
  bool truncated = false;
};
Utf8Step utf8_step(std::string_view bytes, std::size_t position);

// `bytes` as valid UTF-8: each maximal ill-formed subpart replaced by U+FFFD, as Rust's
// String::from_utf8_lossy (which Hugging Face tokenizers' decoders use) does.
std::string utf8_lossy(std::string_view bytes);

}  // namespace kc::engine::detail
