// The disk cache's bookkeeping: counters, tuned configs, listing, eviction
// and clearing (`pejit cache`).
#include "runtime/DiskCache.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace pejit {

namespace {

std::string readSmallFile(const fs::path &path) {
  std::string text;
  if (std::FILE *file = std::fopen(path.c_str(), "rb")) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
      text.append(buffer, n);
    std::fclose(file);
  }
  return text;
}

int64_t entryBytes(const fs::path &entry) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto &file : fs::directory_iterator(entry, ec)) {
    std::error_code sizeError;
    uintmax_t size = file.file_size(sizeError);
    if (!sizeError)
      bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

double ageSeconds(const fs::path &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return 0;
  return static_cast<double>(::time(nullptr) - info.st_mtime);
}

bool isEntryName(const std::string &name) {
  return name.size() == 16 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

} // namespace

void DiskCache::countLookup(bool hit) {
  if (!writable_)
    return;
  std::string path = settings_.dir + "/stats";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  char buffer[256] = {0};
  ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  long long hits = 0, misses = 0;
  if (n > 0)
    std::sscanf(buffer, "hits %lld misses %lld", &hits, &misses);
  (hit ? hits : misses) += 1;
  int length = std::snprintf(buffer, sizeof(buffer), "hits %lld misses %lld\n", hits, misses);
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, buffer, static_cast<size_t>(length), 0) < 0)
    warnOnce("cannot update '" + path + "'");
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

std::optional<TileConfig> DiskCache::loadTuned(const std::string &tuneKey) const {
  if (!readable_)
    return std::nullopt;
  std::istringstream text(readSmallFile(settings_.dir + "/tuned/" + fnv1aHex(tuneKey)));
  std::string word, fingerprint;
  TileConfig tiles;
  // "pejit-tuned 1 <fingerprint>\ntile M N\n..."; anything else is ignored.
  if (!(text >> word) || word != "pejit-tuned" || !(text >> word >> fingerprint) ||
      fingerprint != compilerFingerprint() || !(text >> word) || word != "tile" ||
      !(text >> tiles.queryTile >> tiles.keyTile) || tiles.queryTile <= 0 || tiles.keyTile <= 0)
    return std::nullopt;
  return tiles;
}

void DiskCache::storeTuned(const std::string &tuneKey, const TileConfig &tiles,
                           const std::string &report) {
  if (!writable_)
    return;
  std::error_code ec;
  fs::path dir = settings_.dir + "/tuned";
  fs::create_directories(dir, ec);
  fs::path temp = dir / (".tmp-" + std::to_string(::getpid()));
  std::string text = "pejit-tuned 1 " + compilerFingerprint() + "\ntile " +
                     std::to_string(tiles.queryTile) + " " + std::to_string(tiles.keyTile) +
                     "\n" + report;
  if (std::FILE *file = std::fopen(temp.c_str(), "wb")) {
    bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    ok = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0 && ok;
    ok = std::fclose(file) == 0 && ok;
    if (ok && ::rename(temp.c_str(), (dir / fnv1aHex(tuneKey)).c_str()) == 0)
      return;
  }
  fs::remove(temp, ec);
  warnOnce("cannot store the tuned config in '" + dir.string() + "'");
}

std::vector<DiskCache::EntryInfo> DiskCache::list(bool verify) const {
  std::vector<EntryInfo> entries;
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(settings_.dir, ec)) {
    std::string name = item.path().filename().string();
    if (!isEntryName(name) || !item.is_directory())
      continue;
    EntryInfo info;
    info.name = name;
    info.bytes = entryBytes(item.path());
    info.ageSeconds = ageSeconds(item.path() / "meta");
    std::string meta = readSmallFile(item.path() / "meta");
    size_t at = meta.find("\nsummary ");
    if (at != std::string::npos)
      info.summary = meta.substr(at + 9, meta.find('\n', at + 9) - at - 9);
    if (verify) {
      std::string stages = readSmallFile(item.path() / "stages");
      size_t eol = stages.find('\n');
      std::string key;
      if (eol != std::string::npos) {
        size_t length = std::strtoull(stages.c_str() + 4, nullptr, 10);
        key = stages.substr(eol + 1, length);
      }
      // A load checks everything a use would: meta, sizes, checksums, key.
      DiskCache probe(*this);
      probe.writable_ = false;
      if (key.empty() || fnv1aHex(key) != name)
        info.problem = "stages is missing or does not hold this entry's key";
      else if (!probe.load(key))
        info.problem = "damaged (see the warning above)";
    }
    entries.push_back(info);
  }
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo &a, const EntryInfo &b) { return a.ageSeconds < b.ageSeconds; });
  return entries;
}

DiskCache::Stats DiskCache::stats() const {
  Stats stats;
  long long hits = 0, misses = 0;
  std::sscanf(readSmallFile(settings_.dir + "/stats").c_str(), "hits %lld misses %lld", &hits,
              &misses);
  stats.hits = hits;
  stats.misses = misses;
  for (const EntryInfo &entry : list(false)) {
    stats.entries += 1;
    stats.bytes += entry.bytes;
  }
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(settings_.dir + "/tuned", ec))
    if (item.path().filename().string()[0] != '.')
      stats.tunedConfigs += 1;
  return stats;
}

void DiskCache::evict() {
  struct Candidate {
    fs::path path;
    int64_t bytes;
    double age;
  };
  std::vector<Candidate> entries;
  int64_t total = 0;
  std::error_code ec;
  for (const auto &item : fs::directory_iterator(settings_.dir, ec)) {
    std::string name = item.path().filename().string();
    // Temporary directories of writers that died (an hour is ample).
    if ((name.rfind(".tmp-", 0) == 0 || name.rfind(".trash-", 0) == 0) &&
        ageSeconds(item.path()) > 3600) {
      std::error_code removeError;
      fs::remove_all(item.path(), removeError);
      continue;
    }
    if (!isEntryName(name))
      continue;
    Candidate candidate{item.path(), entryBytes(item.path()), ageSeconds(item.path() / "meta")};
    total += candidate.bytes;
    entries.push_back(candidate);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Candidate &a, const Candidate &b) { return a.age > b.age; });
  for (const Candidate &oldest : entries) {
    if (total <= settings_.maxBytes)
      break;
    std::error_code removeError;
    fs::remove_all(oldest.path, removeError);
    fs::remove(oldest.path.string() + ".lock", removeError);
    total -= oldest.bytes;
  }
}

int64_t DiskCache::clear() {
  int64_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto &item : fs::directory_iterator(settings_.dir, ec)) {
    std::string name = item.path().filename().string();
    std::string stem = name.substr(0, 16);
    if (isEntryName(name))
      removed += 1;
    if (isEntryName(stem) || name == "tuned" || name == "stats" || name[0] == '.')
      doomed.push_back(item.path());
  }
  for (const fs::path &path : doomed) {
    std::error_code removeError;
    fs::remove_all(path, removeError);
  }
  return removed;
}

} // namespace pejit
