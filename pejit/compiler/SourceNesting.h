// A guard in front of MLIR's parser, which is recursive: brackets nested a
// few thousand deep (100,000 '[' in a fuzzed input) overflow the stack and
// end the process with SIGSEGV instead of a diagnostic. pejit's own programs
// nest about a dozen deep; anything beyond kMaxSourceNesting is refused with
// the line and column where the limit is crossed.
#ifndef PEJIT_COMPILER_SOURCENESTING_H
#define PEJIT_COMPILER_SOURCENESTING_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace pejit {

/// Brackets ( [ { < open at once, at most (128 nested regions fit in a 1 MiB
/// stack; the parser needs ~4 KiB per region level).
constexpr int kMaxSourceNesting = 256;

/// "NAME:LINE:COL: error: ..." when `text` nests brackets deeper than
/// kMaxSourceNesting, else nothing. Strings and // comments are skipped, and
/// the '>' of "->" closes nothing.
std::optional<std::string> sourceNestingProblem(llvm::StringRef text, llvm::StringRef name);

} // namespace pejit

#endif // PEJIT_COMPILER_SOURCENESTING_H
