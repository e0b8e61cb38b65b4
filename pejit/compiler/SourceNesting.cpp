#include "pejit/compiler/SourceNesting.h"

namespace pejit {

std::optional<std::string> sourceNestingProblem(llvm::StringRef text, llvm::StringRef name) {
  int depth = 0, line = 1, column = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
    } else if (c == '"') {
      // A string literal, with \" escapes; it ends at the line's end at the
      // latest (an unterminated string is the parser's to report).
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i, ++column)
        if (text[i] == '\\')
          ++i, ++column;
      ++column;
      if (i < text.size() && text[i] == '\n')
        --i, --column;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxSourceNesting)
        return name.str() + ":" + std::to_string(line) + ":" + std::to_string(column) +
               ": error: brackets nest deeper than " + std::to_string(kMaxSourceNesting) +
               " levels, pejit's limit for its (recursive) parser";
    } else if (c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || text[i - 1] != '-'))) {
      depth = depth > 0 ? depth - 1 : 0;
    }
  }
  return std::nullopt;
}

} // namespace pejit
