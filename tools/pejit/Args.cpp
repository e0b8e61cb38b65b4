#include "tools/pejit/Args.h"

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

namespace {

/// Edit distance (insertions, deletions, substitutions) of two names.
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

/// The flag closest to a mistyped one, if it is close (at most a third of
/// its letters off); else empty.
std::string nearestName(const std::string &name, const std::vector<FlagSpec> &specs) {
  std::string best;
  size_t bestDistance = name.size() / 3 + 1;
  for (const FlagSpec &spec : specs)
    if (size_t d = editDistance(name, spec.name); d < bestDistance) {
      best = spec.name;
      bestDistance = d;
    }
  return best;
}

} // namespace

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
      std::string nearest = nearestName(name, specs);
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
