// The autotuner's choices in the disk cache (<dir>/tuned/<hash>), kept like
// kernel entries: written to a temporary file, fsynced and renamed; a
// checksum over the text; validated on load against the x86 tile rules. A
// damaged or invalid config is reported once, removed, and the default tiles
// are used; `pejit cache verify` checks every one.
//
//   pejit-tuned 2 <compiler fingerprint>
//   tile <tile_m> <tile_n>
//   summary <what was tuned>
//   <the tuner's table>
//   checksum <FNV-1a of everything above>
#include "pejit/compiler/backends/x86/X86TileRules.h"
#include "pejit/runtime/cache/DiskCache.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace pejit {

namespace {

constexpr const char *kTunedHeader = "pejit-tuned 2 ";

std::string readWhole(const fs::path &path, bool &found) {
  std::string text;
  found = false;
  if (std::FILE *file = std::fopen(path.c_str(), "rb")) {
    found = true;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0 && text.size() < (1 << 20))
      text.append(buffer, n);
    std::fclose(file);
  }
  return text;
}

} // namespace

TunedFile parseTunedFile(const std::string &text) {
  TunedFile tuned;
  size_t last = text.rfind("checksum ");
  if (text.rfind("pejit-tuned ", 0) != 0 || last == std::string::npos) {
    tuned.problem = "not a pejit tuned config";
    return tuned;
  }
  std::string stored = text.substr(last + 9);
  while (!stored.empty() && (stored.back() == '\n' || stored.back() == ' '))
    stored.pop_back();
  std::string body = text.substr(0, last);
  if (fnv1aHex(body) != stored) {
    tuned.problem = "checksum mismatch";
    return tuned;
  }
  std::istringstream lines(body);
  std::string header, word;
  std::getline(lines, header);
  if (header.rfind(kTunedHeader, 0) != 0) {
    tuned.problem = "unknown format '" + header + "'";
    return tuned;
  }
  tuned.fingerprint = header.substr(std::string(kTunedHeader).size());
  std::string tileLine, summaryLine;
  std::getline(lines, tileLine);
  std::getline(lines, summaryLine);
  std::istringstream tile(tileLine);
  long long m = 0, n = 0;
  if (!(tile >> word >> m >> n) || word != "tile" || !(tile >> std::ws).eof()) {
    tuned.problem = "malformed tile line '" + tileLine + "'";
    return tuned;
  }
  tuned.tiles = {m, n};
  if (summaryLine.rfind("summary ", 0) == 0)
    tuned.summary = summaryLine.substr(8);
  // Tiles that fail at the smallest head dims (d = 8, dv = 16) fail for
  // every shape; the rest are checked again when a kernel is compiled.
  tuned.problem = x86TileProblem(m, n, 8, 16);
  return tuned;
}

std::optional<X86TileConfig> DiskCache::loadTuned(const std::string &tuneKey) {
  if (!readable_)
    return std::nullopt;
  bool found = false;
  std::string text = readWhole(tunedPath(tuneKey), found);
  if (!found)
    return std::nullopt;
  TunedFile tuned = parseTunedFile(text);
  if (!tuned.problem.empty()) {
    discardTuned(tuneKey, tuned.problem);
    return std::nullopt;
  }
  // Another pejit build's choice: not damage, just not ours to use.
  if (tuned.fingerprint != compilerFingerprint())
    return std::nullopt;
  return tuned.tiles;
}

void DiskCache::discardTuned(const std::string &tuneKey, const std::string &why) {
  warnOnce("tuned config '" + tunedPath(tuneKey) + "' is damaged or invalid (" + why +
           "); removed, using the default tiles");
  if (writable_) {
    std::error_code ec;
    fs::remove(tunedPath(tuneKey), ec);
  }
}

void DiskCache::storeTuned(const std::string &tuneKey, const X86TileConfig &tiles,
                           const std::string &summary, const std::string &report) {
  if (!writable_)
    return;
  std::error_code ec;
  fs::path dir = settings_.dir + "/tuned";
  fs::create_directories(dir, ec);
  fs::path temp = dir / (".tmp-" + fnv1aHex(tuneKey) + "-" + uniqueWriterSuffix());
  std::string text = kTunedHeader + compilerFingerprint() + "\ntile " +
                     std::to_string(tiles.queryTile) + " " + std::to_string(tiles.keyTile) +
                     "\nsummary " + summary + "\n" + report;
  if (!text.empty() && text.back() != '\n')
    text += '\n';
  text += "checksum " + fnv1aHex(text) + "\n";
  if (std::FILE *file = std::fopen(temp.c_str(), "wb")) {
    bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    ok = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0 && ok;
    ok = std::fclose(file) == 0 && ok;
    if (ok && ::rename(temp.c_str(), tunedPath(tuneKey).c_str()) == 0)
      return;
  }
  fs::remove(temp, ec);
  warnOnce("cannot store the tuned config in '" + dir.string() + "'");
}

std::string DiskCache::tunedPath(const std::string &tuneKey) const {
  return settings_.dir + "/tuned/" + fnv1aHex(tuneKey);
}

std::vector<DiskCache::EntryInfo> DiskCache::listTuned(bool verify) const {
  std::vector<EntryInfo> entries;
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(settings_.dir + "/tuned", ec)) {
    std::string name = item.path().filename().string();
    if (name.empty() || name[0] == '.')
      continue;
    EntryInfo info;
    info.name = "tuned/" + name;
    info.tuned = true;
    struct stat status;
    if (::stat(item.path().c_str(), &status) == 0) {
      info.bytes = static_cast<int64_t>(status.st_size);
      info.ageSeconds = static_cast<double>(::time(nullptr) - status.st_mtime);
    }
    bool found = false;
    TunedFile tuned = parseTunedFile(readWhole(item.path(), found));
    info.summary = "tuned tile " + std::to_string(tuned.tiles.queryTile) + "x" +
                   std::to_string(tuned.tiles.keyTile) + " " + tuned.summary;
    if (tuned.problem.empty() && tuned.fingerprint != compilerFingerprint())
      info.summary += " (from another pejit build: unused)";
    if (verify)
      info.problem = tuned.problem;
    entries.push_back(info);
  }
  return entries;
}

} // namespace pejit
