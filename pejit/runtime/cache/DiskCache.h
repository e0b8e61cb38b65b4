// The on-disk kernel cache: one directory per kernel key under
// PEJIT_CACHE_DIR (default $XDG_CACHE_HOME/pejit, else ~/.cache/pejit).
//
//   <dir>/<hash>/meta      key summary, fingerprint, creation time, runtime
//                          fields, and the size + FNV-1a checksum of each file;
//                          the meta text ends with its own checksum
//   <dir>/<hash>/kernel.o  the host object file (loads without compiling);
//                          kernel.1.o, ... the further codegen parts, if any
//   <dir>/<hash>/stages    the full key and the text of every IR stage
//   <dir>/<hash>.lock      flock()ed while one process compiles the key
//   <dir>/tuned/<hash>     the autotuner's choice for a (spec, shape, target),
//                          checksummed and validated like an entry
//                          (TunedConfigs.cpp)
//   <dir>/stats            hits and misses, all processes together
//
// An entry is written into a temporary directory, every file fsynced, and
// renamed into place, so a reader sees a whole entry or none; a crash leaves
// only a temporary directory (named with the writer's pid), which the next
// process to open the cache removes once that pid is gone. A damaged entry
// (truncated, flipped bytes, garbage meta, a missing file) or tuned config
// is reported once as a warning, removed and rebuilt; it is never used. A
// process waiting on another's lock says so after a few seconds and, past
// the lock timeout, compiles the kernel itself.
#ifndef PEJIT_RUNTIME_DISKCACHE_H
#define PEJIT_RUNTIME_DISKCACHE_H

#include "pejit/runtime/X86KernelImpl.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pejit {

/// The environment's cache settings (README, "Environment variables").
struct CacheSettings {
  bool enabled = true;            // PEJIT_DISABLE_CACHE=1 turns the disk cache off
  std::string dir;                // PEJIT_CACHE_DIR
  int64_t maxBytes = 1 << 30;     // PEJIT_CACHE_MAX_MB (default 1024, at most 2^30)
  double lockTimeoutSeconds = 60; // PEJIT_CACHE_LOCK_TIMEOUT: then compile unlocked
  std::string dumpIrDir;          // PEJIT_DUMP_IR: every stage of every compile
  static CacheSettings fromEnvironment();
};

/// The compiler fingerprint in every key: pejit version, LLVM version and a
/// hash of pejit's compiler sources and templates (taken at build time).
const std::string &compilerFingerprint();

/// 16 hex digits of FNV-1a 64 (file names and checksums; not cryptographic).
std::string fnv1aHex(const std::string &bytes);

/// Prints "pejit: warning: MESSAGE" to stderr once per process per message.
void warnOnce(const std::string &message);

/// "<pid>-<counter>-<time>": the tail of a temporary name of this process,
/// unique within it; the cleanup of leftovers reads the pid back.
std::string uniqueWriterSuffix();

/// A tuned config file, parsed and checked; `problem` is empty when whole.
struct TunedFile {
  X86TileConfig tiles{0, 0};
  std::string fingerprint, summary, problem;
};
TunedFile parseTunedFile(const std::string &text);

class DiskCache {
public:
  explicit DiskCache(CacheSettings settings);
  bool readable() const { return readable_; }
  bool writable() const { return writable_; }
  const std::string &dir() const { return settings_.dir; }

  /// The entry of `key`, or nothing (a miss; a damaged entry is removed).
  std::optional<KernelArtifact> load(const std::string &key);
  /// Writes the entry atomically, then evicts down to the size limit.
  void store(const std::string &key, const std::string &summary, const KernelArtifact &artifact);
  /// Removes the entry of `key` (it failed to load), with a warning.
  void discard(const std::string &key, const std::string &why);
  void countLookup(bool hit);
  /// Whether PEJIT_DUMP_IR asks for every stage of every compile.
  bool dumpsStages() const { return !settings_.dumpIrDir.empty(); }
  /// Writes every stage of a fresh compile under PEJIT_DUMP_IR.
  void dumpStages(const std::string &key, const KernelArtifact &artifact) const;

  /// Held while compiling `key`, so other processes wait instead of
  /// compiling it too. Null when the directory is not writable.
  class KeyLock {
  public:
    KeyLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~KeyLock();

  private:
    int fd_;
    std::string path_;
  };
  std::unique_ptr<KeyLock> lockKey(const std::string &key);

  /// The tuned tiles of `tuneKey` from this pejit build, or nothing; a
  /// damaged or invalid config is reported and removed.
  std::optional<X86TileConfig> loadTuned(const std::string &tuneKey);
  /// Removes the tuned config of `tuneKey` with a warning saying why.
  void discardTuned(const std::string &tuneKey, const std::string &why);
  void storeTuned(const std::string &tuneKey, const X86TileConfig &tiles,
                  const std::string &summary, const std::string &report);

  struct EntryInfo {
    std::string name, summary, problem; // problem: empty when the entry is whole
    int64_t bytes = 0;
    double ageSeconds = 0;
    bool tuned = false;
  };
  /// Every entry, then every tuned config; `verify` checks each file's
  /// checksum (else only the meta).
  std::vector<EntryInfo> list(bool verify) const;
  struct Stats {
    int64_t hits = 0, misses = 0, bytes = 0, entries = 0, tunedConfigs = 0;
  };
  Stats stats() const;
  /// Removes every entry, tuned config and the counters; returns the
  /// entries removed. What could not be removed (a read-only directory) is
  /// named in `problem` (left empty when everything went).
  int64_t clear(std::string *problem = nullptr);

private:
  std::string entryDir(const std::string &key) const;
  std::string tunedPath(const std::string &tuneKey) const;
  std::vector<EntryInfo> listTuned(bool verify) const;
  void evict();
  /// Removes temporary and trash files that crashed writers left (their pid
  /// is gone) or that are over an hour old.
  void removeLeftovers();
  CacheSettings settings_;
  bool readable_ = false, writable_ = false;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_DISKCACHE_H
