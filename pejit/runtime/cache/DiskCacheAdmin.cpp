// The disk cache's bookkeeping: counters, tuned configs, listing, eviction
// and clearing (`pejit cache`).
#include "pejit/runtime/cache/DiskCache.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
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
  // Write, then cut to length: the counters only grow, so the new text is
  // never shorter, and a kill in between leaves the new or the old counts
  // (truncating first left an empty file, and the counts were lost).
  if (::pwrite(fd, buffer, static_cast<size_t>(length), 0) != length ||
      ::ftruncate(fd, length) != 0)
    warnOnce("cannot update '" + path + "'");
  ::flock(fd, LOCK_UN);
  ::close(fd);
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
  for (EntryInfo &tuned : listTuned(verify))
    entries.push_back(std::move(tuned));
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

namespace {

/// The writer's pid in a temporary name ending in uniqueWriterSuffix()
/// ("...-<pid>-<counter>-<time>"), or 0.
pid_t writerPid(const std::string &name) {
  size_t last = name.rfind('-');
  size_t middle =
      last == std::string::npos || last == 0 ? std::string::npos : name.rfind('-', last - 1);
  size_t first =
      middle == std::string::npos || middle == 0 ? std::string::npos : name.rfind('-', middle - 1);
  if (first == std::string::npos)
    return 0;
  std::string digits = name.substr(first + 1, middle - first - 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return static_cast<pid_t>(std::strtol(digits.c_str(), nullptr, 10));
}

/// Whether a temporary file or directory is a crashed writer's: its pid is
/// no process on this host (on a cache shared between hosts the pid may be
/// another host's; those go after the hour), or it is over an hour old.
bool isLeftover(const fs::path &path) {
  pid_t pid = writerPid(path.filename().string());
  bool writerGone = pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
  return writerGone || ageSeconds(path) > 3600;
}

} // namespace

void DiskCache::removeLeftovers() {
  std::error_code ec;
  for (const std::string &dir : {settings_.dir, settings_.dir + "/tuned"})
    for (const auto &item : fs::directory_iterator(dir, ec)) {
      std::string name = item.path().filename().string();
      bool temporary = name.rfind(".tmp-", 0) == 0, trash = name.rfind(".trash-", 0) == 0;
      if ((temporary || trash) && isLeftover(item.path())) {
        std::error_code removeError;
        fs::remove_all(item.path(), removeError);
      }
    }
}

void DiskCache::evict() {
  removeLeftovers();
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

int64_t DiskCache::clear(std::string *problem) {
  int64_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto &item : fs::directory_iterator(settings_.dir, ec)) {
    std::string name = item.path().filename().string();
    std::string stem = name.substr(0, 16);
    if (isEntryName(stem) || name == "tuned" || name == "stats" || name[0] == '.')
      doomed.push_back(item.path());
  }
  std::string failed;
  for (const fs::path &path : doomed) {
    std::error_code removeError;
    fs::remove_all(path, removeError);
    bool gone = !fs::exists(fs::symlink_status(path));
    if (gone && isEntryName(path.filename().string()))
      removed += 1;
    if (!gone && failed.empty())
      failed = path.string() + (removeError ? ": " + removeError.message() : std::string());
  }
  if (problem)
    *problem = failed.empty()
                   ? std::string()
                   : "could not remove " + failed + (doomed.size() > 1 ? " (and maybe more)" : "");
  return removed;
}

} // namespace pejit
