// "Did you mean" for mistyped names: the closest of a list of valid names,
// and parse errors of pe/attn programs completed with one from the
// dialects' own vocabulary (every parameter, operand and keyword name in
// their .td files, gathered at configure time: Vocabulary.cmake).
#ifndef PEJIT_COMPILER_SUGGESTIONS_H
#define PEJIT_COMPILER_SUGGESTIONS_H

#include <string>
#include <vector>

namespace pejit {

/// Edits (insertions, deletions, substitutions) from `a` to `b`.
size_t editDistance(const std::string &a, const std::string &b);

/// The name of `names` closest to `typed`, if it is close (at most a third
/// of its letters off, one at least) and not `typed` itself; else empty.
std::string nearestName(const std::string &typed, const std::vector<std::string> &names);

/// The pe and attn dialects' names: parameters, operands, keywords.
const std::vector<std::string> &dialectVocabulary();

/// `message` (MLIR diagnostics, `loc("file":line:col): ...` per line) with
/// "(did you mean 'x'?)" after each error about a name that is close to a
/// name of the vocabulary: an unknown struct parameter, or the word at the
/// error's position in `source`.
std::string withSuggestions(const std::string &message, const std::string &source);

} // namespace pejit

#endif // PEJIT_COMPILER_SUGGESTIONS_H
