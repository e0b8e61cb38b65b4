// pejit tune (autotune a .mlir file's tile sizes) and pejit cache (inspect
// the disk cache: ls, stats, verify, clear).
#include "tools/pejit/Args.h"
#include "tools/pejit/Commands.h"

#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cache/DiskCache.h"

#include <cstdio>
#include <sstream>

namespace pejit::cli {

int tuneCommand(int argc, char **argv) {
  Args args;
  if (std::string error =
          parseArgs(argc, argv, 2, {{"repeats"}, {"candidates"}, {"lengths"}}, args);
      !error.empty())
    return usageError("tune: " + error);
  if (args.positional.size() != 1)
    return usageError("tune: expected one FILE.mlir, got " +
                      std::to_string(args.positional.size()) + " positional arguments");
  TuneOptions options;
  if (std::optional<std::string> repeats = args.value("repeats")) {
    options.repeats = std::atoi(repeats->c_str());
    if (options.repeats < 1)
      return usageError("tune: --repeats=" + *repeats + " is not a positive integer");
  }
  if (std::optional<std::string> list = args.value("candidates")) {
    std::istringstream items(*list);
    for (std::string item; std::getline(items, item, ',');) {
      std::optional<X86TileConfig> tiles = parseTile(item);
      if (!tiles)
        return usageError("tune: candidate '" + item + "' is not MxN (e.g. 96x72)");
      options.candidates.push_back(*tiles);
    }
  }
  Expected<Spec> spec = Spec::fromFile(args.positional[0]);
  if (!spec) {
    std::fprintf(stderr, "pejit: %s\n", spec.error().c_str());
    return kExitError;
  }
  Runtime runtime;
  // --lengths=SQxSKV,...: a shape class's call lengths to time, instead of
  // the representative ones.
  if (std::optional<std::string> list = args.value("lengths")) {
    std::istringstream items(*list);
    for (std::string item; std::getline(items, item, ',');) {
      std::optional<X86TileConfig> pair = parseTile(item); // the same SQxSKV form
      if (!pair)
        return usageError("tune: length '" + item + "' is not SQxSKV (e.g. 1x4096)");
      options.lengths.push_back({pair->queryTile, pair->keyTile});
    }
  }
  Expected<TuneReport> report = runtime.tune(*spec, options);
  if (!report) {
    std::fprintf(stderr, "pejit: %s\n", report.error().c_str());
    return kExitError;
  }
  std::printf("%s\nbest: %lldx%lld (stored; `pejit run` and Runtime::getX86 use it)\n",
              report->table().c_str(), (long long)report->best.queryTile,
              (long long)report->best.keyTile);
  return kExitOk;
}

int cacheCommand(int argc, char **argv) {
  if (argc < 3)
    return usageError("cache: expected ls, stats, verify or clear");
  std::string action = argv[2];
  CacheSettings settings = CacheSettings::fromEnvironment();
  settings.enabled = true; // inspecting works even while PEJIT_DISABLE_CACHE is set
  DiskCache cache(settings);
  if (action == "ls" || action == "verify") {
    bool verify = action == "verify";
    int damaged = 0;
    std::vector<DiskCache::EntryInfo> entries = cache.list(verify);
    std::printf("%s: %zu entries\n", cache.dir().c_str(), entries.size());
    for (const DiskCache::EntryInfo &e : entries) {
      std::printf("%s  %8.1f KB  %8.0f s old  %s%s\n", e.name.c_str(), e.bytes / 1024.0,
                  e.ageSeconds, e.summary.c_str(),
                  verify ? (e.problem.empty() ? "  [ok]" : ("  [" + e.problem + "]").c_str()) : "");
      damaged += !e.problem.empty();
    }
    if (verify)
      std::printf("%d damaged\n", damaged);
    return damaged ? kExitError : kExitOk;
  }
  if (action == "stats") {
    DiskCache::Stats stats = cache.stats();
    std::printf("dir %s\nentries %lld\nbytes %lld\ntuned %lld\nhits %lld\nmisses %lld\n",
                cache.dir().c_str(), (long long)stats.entries, (long long)stats.bytes,
                (long long)stats.tunedConfigs, (long long)stats.hits, (long long)stats.misses);
    return kExitOk;
  }
  if (action == "clear") {
    std::string problem;
    long long removed = static_cast<long long>(cache.clear(&problem));
    std::printf("removed %lld entries from %s\n", removed, cache.dir().c_str());
    if (!problem.empty()) {
      std::fprintf(stderr, "pejit: cache clear: %s\n", problem.c_str());
      return kExitError;
    }
    return kExitOk;
  }
  return usageError("cache: unknown action '" + action + "' (ls, stats, verify, clear)");
}

} // namespace pejit::cli
