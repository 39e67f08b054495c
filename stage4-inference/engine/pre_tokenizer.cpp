// The pre-tokenizer regexes of GPT-2 (used by SmolLM2 after splitting off digits) and Llama 3,
// matched by hand. std::regex has neither Unicode classes nor lookahead, so each alternative of
// the regex becomes a few lines that scan code points. A regex engine tries the alternatives in
// order at the current position and takes the first that matches; every code point is a letter,
// a number, white space or "other", and the last alternative (\s+ or the "other" run) always
// matches, so the matches tile the text without gaps. The comments quote the alternative each
// step implements.
#include "pre_tokenizer.hpp"

#include "unicode.hpp"

namespace kc::engine::detail {
namespace {

// Not \s, not \p{L}, not \p{N}: the class [^\s\p{L}\p{N}].
bool is_other(char32_t c) { return !is_whitespace(c) && !is_letter(c) && !is_number(c); }
bool is_newline(char32_t c) { return c == U'\r' || c == U'\n'; }

class Scanner {
 public:
  explicit Scanner(const std::vector<char32_t>& text) : text_(text) {}

  std::size_t size() const { return text_.size(); }
  bool at(std::size_t i, char32_t c) const { return i < text_.size() && text_[i] == c; }
  template <typename Predicate>
  bool is(std::size_t i, Predicate predicate) const {
    return i < text_.size() && predicate(text_[i]);
  }
  // The end of the run of code points from i that satisfy `predicate`.
  template <typename Predicate>
  std::size_t run_end(std::size_t i, Predicate predicate) const {
    while (is(i, predicate)) ++i;
    return i;
  }
  // Lower-cases ASCII letters, and folds U+017F LATIN SMALL LETTER LONG S to 's' as Unicode case
  // folding does (the one non-ASCII code point that folds onto a letter of the contractions).
  char32_t folded(std::size_t i) const {
    const char32_t c = text_[i];
    if (c >= U'A' && c <= U'Z') return c - U'A' + U'a';
    if (c == U'\u017F') return U's';
    return c;
  }

  // The length of the contraction at i ('s 't 're 've 'm 'll 'd), 0 when there is none.
  std::size_t contraction(std::size_t i, bool ignore_case) const {
    if (!at(i, U'\'') || i + 1 >= size()) return 0;
    const auto letter = [&](std::size_t k) -> char32_t {
      if (k >= size()) return 0;
      return ignore_case ? folded(k) : text_[k];
    };
    const char32_t a = letter(i + 1);
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
    const char32_t b = letter(i + 2);
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
    return 0;
  }

  // \s+(?!\S) then \s+, from i where text[i] is white space: the whole run when it reaches the end
  // of the text; else the run but its last code point (which then starts the next piece, as a
  // space before a word); a single white-space code point before non-space is matched by \s+.
  std::size_t whitespace(std::size_t i) const {
    const std::size_t end = run_end(i, is_whitespace);
    if (end == size()) return end;
    return end - 1 > i ? end - 1 : end;
  }

 private:
  const std::vector<char32_t>& text_;
};

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over code points [begin, end) of the text.
void split_gpt2(const std::vector<char32_t>& all, std::size_t begin, std::size_t end,
                std::vector<Piece>& pieces) {
  const std::vector<char32_t> text(all.begin() + static_cast<std::ptrdiff_t>(begin),
                                   all.begin() + static_cast<std::ptrdiff_t>(end));
  const Scanner s(text);
  for (std::size_t i = 0; i < s.size();) {
    std::size_t next = 0;
    const std::size_t after_space = s.at(i, U' ') ? i + 1 : i;
    if (const std::size_t n = s.contraction(i, false)) {
      next = i + n;
    } else if (s.is(after_space, is_letter)) {  // ' ?\p{L}+'
      next = s.run_end(after_space, is_letter);
    } else if (s.is(after_space, is_number)) {  // ' ?\p{N}+'
      next = s.run_end(after_space, is_number);
    } else if (s.is(after_space, is_other)) {  // ' ?[^\s\p{L}\p{N}]+'
      next = s.run_end(after_space, is_other);
    } else {  // text[i] is white space
      next = s.whitespace(i);
    }
    pieces.push_back({begin + i, begin + next});
    i = next;
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const std::vector<char32_t>& text, std::vector<Piece>& pieces) {
  const Scanner s(text);
  const auto not_newline_letter_number = [](char32_t c) {
    return !is_newline(c) && !is_letter(c) && !is_number(c);
  };
  for (std::size_t i = 0; i < s.size();) {
    std::size_t next = 0;
    const std::size_t after_space = s.at(i, U' ') ? i + 1 : i;
    if (const std::size_t n = s.contraction(i, true)) {
      next = i + n;
    } else if (s.is(i, not_newline_letter_number) && s.is(i + 1, is_letter)) {
      next = s.run_end(i + 1, is_letter);  // '[^\r\n\p{L}\p{N}]\p{L}+', with the prefix
    } else if (s.is(i, is_letter)) {
      next = s.run_end(i, is_letter);  // '\p{L}+', without it
    } else if (s.is(i, is_number)) {  // '\p{N}{1,3}'
      next = i + 1;
      while (next < i + 3 && s.is(next, is_number)) ++next;
    } else if (s.is(after_space, is_other)) {  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
      next = s.run_end(s.run_end(after_space, is_other), is_newline);
    } else {  // text[i] is white space
      // '\s*[\r\n]+': the white-space run up to and including its last \r or \n, if it has one.
      const std::size_t run = s.run_end(i, is_whitespace);
      std::size_t last_newline = run;
      for (std::size_t k = i; k < run; ++k)
        if (is_newline(text[k])) last_newline = k;
      next = last_newline < run ? last_newline + 1 : s.whitespace(i);
    }
    pieces.push_back({i, next});
    i = next;
  }
}

}  // namespace

std::vector<Piece> pre_tokenize(PreTokenizerKind kind, const std::vector<char32_t>& code_points) {
  std::vector<Piece> pieces;
  switch (kind) {
    case PreTokenizerKind::none:
      if (!code_points.empty()) pieces.push_back({0, code_points.size()});
      break;
    case PreTokenizerKind::gpt2:
      split_gpt2(code_points, 0, code_points.size(), pieces);
      break;
    case PreTokenizerKind::smollm:
      // Hugging Face's Digits(individual_digits) first: every \p{N} code point alone, the runs
      // between them together; then the GPT-2 regex inside each run (its lookahead sees the end
      // of the run, not the digit after it).
      for (std::size_t i = 0; i < code_points.size();) {
        if (is_number(code_points[i])) {
          pieces.push_back({i, i + 1});
          ++i;
          continue;
        }
        std::size_t end = i;
        while (end < code_points.size() && !is_number(code_points[end])) ++end;
        split_gpt2(code_points, i, end, pieces);
        i = end;
      }
      break;
    case PreTokenizerKind::llama3:
      split_llama3(code_points, pieces);
      break;
  }
  return pieces;
}

}  // namespace kc::engine::detail
