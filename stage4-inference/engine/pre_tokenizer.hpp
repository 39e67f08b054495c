// engine/pre_tokenizer.hpp (private to the tokenizer) — the pre-tokenizers of the supported
// models, each a hand-written matcher for one regex, exactly as the regex engine would split.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kc/engine/tokenizer.hpp"

namespace kc::engine::detail {

// A piece of the text: code points [begin, end).
struct Piece {
  std::size_t begin;
  std::size_t end;
};

// Splits `code_points` into the pieces that BPE then encodes one by one. Every code point lands
// in exactly one piece, in order (PreTokenizerKind::none: one piece, none for empty text).
std::vector<Piece> pre_tokenize(PreTokenizerKind kind, const std::vector<char32_t>& code_points);

}  // namespace kc::engine::detail
