#include "tools/pejit/Args.h"

#include "pejit/compiler/Suggestions.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace pejit::cli {

std::optional<std::string> Args::value(const std::string &name) const {
  auto it = flags.find(name);
  if (it == flags.end() || it->second.empty())
    return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(const std::string &name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>() : it->second;
}

std::string parseArgs(int argc, char **argv, int first, const std::vector<FlagSpec> &specs,
                      Args &out) {
  bool flagsDone = false;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (flagsDone || arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flagsDone = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      out.flags["help"].push_back("");
      continue;
    }
    if (arg.compare(0, 2, "--") != 0)
      return "unknown option '" + arg + "' (flags are spelled --name=value)";
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    bool hasValue = eq != std::string::npos;
    if (hasValue) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec *spec = nullptr;
    for (const FlagSpec &s : specs)
      if (s.name == name)
        spec = &s;
    if (!spec) {
      std::vector<std::string> names;
      for (const FlagSpec &candidate : specs)
        names.push_back(candidate.name);
      std::string nearest = nearestName(name, names);
      return "unknown flag '--" + name + "'" +
             (nearest.empty() ? std::string() : "; did you mean '--" + nearest + "'?");
    }
    if (spec->takesValue && !hasValue) {
      if (i + 1 >= argc)
        return "flag '--" + name + "' needs a value (--" + name + "=VALUE)";
      value = argv[++i];
    } else if (!spec->takesValue && hasValue) {
      return "flag '--" + name + "' takes no value";
    }
    if (!spec->repeatable && out.has(name))
      return "flag '--" + name + "' is given more than once";
    out.flags[name].push_back(value);
  }
  return "";
}

std::optional<int64_t> parseInteger(const std::string &text, int64_t minimum) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  errno = 0;
  long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno != 0 || value < minimum)
    return std::nullopt;
  return static_cast<int64_t>(value);
}

std::optional<X86TileConfig> parseTile(const std::string &text) {
  size_t x = text.find('x');
  if (x == std::string::npos)
    return std::nullopt;
  std::optional<int64_t> m = parseInteger(text.substr(0, x), 1);
  std::optional<int64_t> n = parseInteger(text.substr(x + 1), 1);
  if (!m || !n)
    return std::nullopt;
  return X86TileConfig{*m, *n};
}

std::string filePath(const std::string &reference) {
  return !reference.empty() && reference[0] == '@' ? reference.substr(1) : reference;
}

} // namespace pejit::cli
