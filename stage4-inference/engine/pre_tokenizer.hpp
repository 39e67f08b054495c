// engine/pre_tokenizer.hpp (private to the tokenizer) — the pre-tokenizers of the supported
// models, each a hand-written matcher for one regex, exactly as the regex engine would split.
#pragma once

#include <cstddef>
#include <string>
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

// The merges, in rank order, that transformers builds for a GGUF "llama" tokenizer from its
// tokens and scores (defined in tokenizer.cpp, which says how). `tokens` are distinct; a token
// that is not valid UTF-8 is a kc::Error naming `source`.
std::vector<std::pair<std::string, std::string>> merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<double>& scores,
    const std::string& source);

}  // namespace kc::engine::detail
