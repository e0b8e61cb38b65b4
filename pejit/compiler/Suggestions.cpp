// Suggestions.h: the nearest name, and parse errors completed with one.
#include "pejit/compiler/Suggestions.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>

namespace pejit {

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearestName(const std::string &typed, const std::vector<std::string> &names) {
  std::string best;
  size_t bestDistance = std::max<size_t>(1, typed.size() / 3) + 1;
  for (const std::string &name : names) {
    if (name == typed)
      return "";
    if (size_t d = editDistance(typed, name); d < bestDistance) {
      best = name;
      bestDistance = d;
    }
  }
  return best;
}

const std::vector<std::string> &dialectVocabulary() {
  static const std::vector<std::string> names = {
#include "pejit/compiler/Vocabulary.inc"
  };
  return names;
}

namespace {

/// The identifier that starts at 1-based (line, column) of `source`.
std::string wordAt(const std::string &source, size_t line, size_t column) {
  std::istringstream lines(source);
  std::string text;
  for (size_t n = 0; n < line && std::getline(lines, text); ++n) {
  }
  if (column == 0 || column > text.size())
    return "";
  // MLIR points at the token, or at the blank before it.
  while (column <= text.size() && std::isspace(static_cast<unsigned char>(text[column - 1])))
    ++column;
  if (column > text.size())
    return "";
  size_t end = column - 1;
  while (end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
    ++end;
  return text.substr(column - 1, end - (column - 1));
}

} // namespace

std::string withSuggestions(const std::string &message, const std::string &source) {
  static const std::regex location(R"(loc\("[^"]*":(\d+):(\d+)\))");
  static const std::regex unknownParameter(
      R"(unknown struct parameter name: ([A-Za-z_][A-Za-z0-9_]*))");
  std::istringstream lines(message);
  std::string out;
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    std::string typed;
    if (std::regex_search(line, match, unknownParameter))
      typed = match[1];
    else if (std::regex_search(line, match, location))
      typed = wordAt(source, std::stoul(match[1]), std::stoul(match[2]));
    std::string nearest = typed.empty() ? "" : nearestName(typed, dialectVocabulary());
    out += (out.empty() ? "" : "\n") + line;
    if (!nearest.empty())
      out += " (did you mean '" + nearest + "' for '" + typed + "'?)";
  }
  return out;
}

} // namespace pejit
