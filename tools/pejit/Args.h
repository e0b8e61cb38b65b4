// Flag parsing for the pejit subcommands: positional arguments and
// --name=value / --name value / --switch flags, each declared up front so an
// unknown or malformed flag is a usage error (exit code 2).
#ifndef PEJIT_TOOLS_PEJIT_ARGS_H
#define PEJIT_TOOLS_PEJIT_ARGS_H

#include "pejit/runtime/Pejit.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pejit::cli {

struct FlagSpec {
  std::string name; ///< without the leading "--"
  bool takesValue = true;
  bool repeatable = false;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;

  bool has(const std::string &name) const { return flags.count(name) != 0; }
  /// The flag's (last) value, if given.
  std::optional<std::string> value(const std::string &name) const;
  /// Every value of a repeatable flag, in order.
  std::vector<std::string> values(const std::string &name) const;
};

/// Parses args [first, argc). Returns "" or a usage message. "--" ends the
/// flags; "-h"/"--help" is recorded as the flag "help".
std::string parseArgs(int argc, char **argv, int first, const std::vector<FlagSpec> &specs,
                      Args &out);

/// "96x72" -> {96, 72}; std::nullopt if malformed (the template checks the
/// multiples when compiling).
std::optional<X86TileConfig> parseTile(const std::string &text);

/// A decimal integer >= minimum, or std::nullopt.
std::optional<int64_t> parseInteger(const std::string &text, int64_t minimum);

/// "@q.npy" -> "q.npy" (iree-run-module style file reference); other text is
/// returned as is.
std::string filePath(const std::string &reference);

} // namespace pejit::cli

#endif // PEJIT_TOOLS_PEJIT_ARGS_H
