// The on-disk kernel cache (DiskCache.h has the layout and the guarantees).
#include "pejit/runtime/cache/DiskCache.h"

#include "pejit/runtime/SourceFingerprint.inc"
#include "pejit/runtime/Version.h"

#include "llvm/Config/llvm-config.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace pejit {

namespace {

constexpr const char *kMetaHeader = "pejit-cache-entry 1";

std::optional<std::string> readFile(const fs::path &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return std::nullopt;
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0)
      break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

/// Creates `path` (which must not exist), writes and fsyncs it.
bool writeFileSynced(const fs::path &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  bool ok = ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

void fsyncDir(const fs::path &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Renames an entry out of the way first, so no reader sees it half removed.
void removeEntryDir(const fs::path &entry) {
  std::error_code ec;
  fs::path trash =
      entry.parent_path() / (".trash-" + entry.filename().string() + "-" + uniqueWriterSuffix());
  fs::rename(entry, trash, ec);
  fs::remove_all(ec ? entry : trash, ec);
}

void appendSection(std::string &out, const std::string &name, const std::string &bytes) {
  out += name + " " + std::to_string(bytes.size()) + "\n" + bytes + "\n";
}

/// Parses "name length\nbytes\n" sections; false on any inconsistency.
bool parseSections(const std::string &text, std::map<std::string, std::string> &sections) {
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos)
      return false;
    std::istringstream header(text.substr(at, eol - at));
    std::string name;
    uint64_t length = 0;
    if (!(header >> name >> length) || length > text.size() - eol - 1 ||
        eol + 1 + length >= text.size() || text[eol + 1 + length] != '\n')
      return false;
    sections[name] = text.substr(eol + 1, length);
    at = eol + 2 + length;
  }
  return true;
}

struct Meta {
  std::map<std::string, std::string> fields;
  std::map<std::string, std::pair<uint64_t, std::string>> files; // size, checksum
};

/// Parses and checks a meta text; an error message names what is wrong.
std::optional<Meta> parseMeta(const std::string &text, std::string &problem) {
  size_t last = text.rfind("checksum ");
  if (text.rfind(kMetaHeader, 0) != 0 || last == std::string::npos) {
    problem = "meta is not a pejit cache entry";
    return std::nullopt;
  }
  std::string stored = text.substr(last + 9);
  while (!stored.empty() && stored.back() == '\n')
    stored.pop_back();
  if (fnv1aHex(text.substr(0, last)) != stored) {
    problem = "meta checksum mismatch";
    return std::nullopt;
  }
  Meta meta;
  std::istringstream lines(text.substr(0, last));
  std::string line;
  std::getline(lines, line); // header
  while (std::getline(lines, line)) {
    size_t space = line.find(' ');
    std::string name = line.substr(0, space);
    std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (name == "file") {
      std::istringstream f(value);
      std::string file, sum;
      uint64_t size = 0;
      if (!(f >> file >> size >> sum)) {
        problem = "meta has a malformed file line";
        return std::nullopt;
      }
      meta.files[file] = {size, sum};
    } else {
      meta.fields[name] = value;
    }
  }
  if (!meta.files.count("kernel.o") || !meta.files.count("stages")) {
    problem = "meta lists no kernel.o or stages";
    return std::nullopt;
  }
  return meta;
}

/// Reads a file listed in the meta and checks its size and checksum.
std::optional<std::string> readChecked(const fs::path &entry, const Meta &meta,
                                       const std::string &file, std::string &problem) {
  std::optional<std::string> bytes = readFile(entry / file);
  const auto &[size, sum] = meta.files.at(file);
  if (!bytes)
    problem = file + " is missing";
  else if (bytes->size() != size)
    problem = file + " is truncated or grown (" + std::to_string(bytes->size()) + " of " +
              std::to_string(size) + " bytes)";
  else if (fnv1aHex(*bytes) != sum)
    problem = file + " checksum mismatch";
  else
    return bytes;
  return std::nullopt;
}

/// The file of the artifact's i-th object: kernel.o, kernel.1.o, ...
std::string objectFileName(size_t i) {
  return i == 0 ? "kernel.o" : "kernel." + std::to_string(i) + ".o";
}

} // namespace

std::string fnv1aHex(const std::string &bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::string uniqueWriterSuffix() {
  static std::atomic<int64_t> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

void warnOnce(const std::string &message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(message).second)
    std::fprintf(stderr, "pejit: warning: %s\n", message.c_str());
}

const std::string &compilerFingerprint() {
  static const std::string fingerprint = std::string("pejit-") + PEJIT_VERSION + "/llvm-" +
                                         LLVM_VERSION_STRING + "/src-" + kPejitSourceFingerprint;
  return fingerprint;
}

DiskCache::DiskCache(CacheSettings settings) : settings_(std::move(settings)) {
  if (!settings_.enabled)
    return;
  if (settings_.dir.empty()) {
    warnOnce("no cache directory (set PEJIT_CACHE_DIR or HOME); kernels stay in memory");
    return;
  }
  std::error_code ec;
  fs::create_directories(settings_.dir, ec);
  readable_ = ::access(settings_.dir.c_str(), R_OK | X_OK) == 0;
  writable_ = readable_ && ::access(settings_.dir.c_str(), W_OK) == 0;
  if (!writable_)
    warnOnce("cache directory '" + settings_.dir + "' is " +
             (readable_ ? "read-only" : "missing and cannot be created") +
             (ec ? " (" + ec.message() + ")" : "") + "; new kernels stay in memory");
  else
    removeLeftovers();
}

std::string DiskCache::entryDir(const std::string &key) const {
  return settings_.dir + "/" + fnv1aHex(key);
}

std::optional<KernelArtifact> DiskCache::load(const std::string &key) {
  if (!readable_)
    return std::nullopt;
  fs::path entry = entryDir(key);
  std::optional<std::string> metaText = readFile(entry / "meta");
  if (!metaText) {
    std::error_code ec;
    if (fs::exists(entry, ec))
      discard(key, "meta is missing");
    return std::nullopt;
  }
  std::string problem;
  std::optional<Meta> meta = parseMeta(*metaText, problem);
  std::vector<std::string> objects;
  std::optional<std::string> stagesText;
  std::map<std::string, std::string> stages;
  for (size_t i = 0; meta && problem.empty() && meta->files.count(objectFileName(i)); ++i)
    if (std::optional<std::string> object = readChecked(entry, *meta, objectFileName(i), problem))
      objects.push_back(std::move(*object));
  if (meta && problem.empty())
    stagesText = readChecked(entry, *meta, "stages", problem);
  if (stagesText && !parseSections(*stagesText, stages))
    problem = "stages is malformed";
  if (problem.empty() && stages["key"] != key)
    problem = "it holds another key (hash collision)";
  if (!problem.empty()) {
    discard(key, problem);
    return std::nullopt;
  }
  KernelArtifact artifact;
  std::istringstream shape(meta->fields["shape"]);
  Shape &s = artifact.shape;
  shape >> s.batch >> s.queryHeads >> s.kvHeads >> s.querySeq >> s.keySeq >> s.headDim >>
      s.valueDim;
  Expected<KernelSignature> signature = KernelSignature::parse(meta->fields["arguments"]);
  if (!signature) {
    discard(key, "meta's arguments: " + signature.error());
    return std::nullopt;
  }
  artifact.signature = *signature;
  artifact.items = std::atoll(meta->fields["items"].c_str());
  artifact.scratchFloats = std::atoll(meta->fields["scratch"].c_str());
  artifact.prepareJobs = std::atoll(meta->fields["prepare-jobs"].c_str());
  // How a call is planned (pejit/core/CallPlan.h).
  std::istringstream planRule(meta->fields["call-plan"]);
  planRule >> artifact.queryTile >> artifact.keyTile >> artifact.keyCacheTile >>
      artifact.tableFloatsPerQueryPosition >> artifact.tableFloatsPerKeyPosition >>
      artifact.decodeGroup;
  std::istringstream rows(meta->fields["position-rows"]);
  rows >> artifact.queryPositionRows >> artifact.keyPositionRows;
  if (!(rows >> artifact.positionAxes)) // entries before M-RoPE: one axis
    artifact.positionAxes = 1;
  if (!(rows >> artifact.positionLimit) || artifact.positionLimit < 0) // none: any id
    artifact.positionLimit = 0;
  // The x86 ISA family (the loader checks the host has its flags).
  std::istringstream isa(meta->fields["isa"]);
  isa >> artifact.isa >> artifact.lanes;
  std::istringstream dtypes(meta->fields["dtypes"]);
  std::string inName = "float32", outName = "float32";
  dtypes >> inName >> outName;
  std::optional<DType> in = floatDtypeNamed(inName), out = floatDtypeNamed(outName);
  if (!in || !out) {
    discard(key, "meta names unknown dtypes '" + meta->fields["dtypes"] + "'");
    return std::nullopt;
  }
  artifact.inputDtype = *in;
  artifact.outputDtype = *out;
  // A shape class's items are the call's; a static kernel has its own.
  bool hasItems = artifact.items > 0 || (artifact.shape.hasDynamicDims() && artifact.queryTile > 0);
  if (!shape || !hasItems ||
      (artifact.signature.arguments.empty() && !artifact.signature.materializedBias)) {
    discard(key, "meta lacks the kernel's shape, items or arguments");
    return std::nullopt;
  }
  // Each x86 call is planned by this rule (CallPlan.h; the x86 load
  // refuses tiles of 0 rows).
  if (!planRule || artifact.queryTile < 0 || artifact.keyTile < 0 || artifact.keyCacheTile < 0 ||
      artifact.tableFloatsPerQueryPosition < 0 || artifact.tableFloatsPerKeyPosition < 0 ||
      artifact.decodeGroup < 0 || artifact.decodeGroup > 8) {
    discard(key, "meta's call-plan '" + meta->fields["call-plan"] + "' is malformed");
    return std::nullopt;
  }
  // A backward's scratch floats per row; entries before Shaw's backward
  // end the call-plan before it (2: D and lse).
  if (!(planRule >> artifact.rowScratchFloats))
    artifact.rowScratchFloats = 2;
  if (artifact.rowScratchFloats < 2) {
    discard(key, "meta's call-plan '" + meta->fields["call-plan"] + "' is malformed");
    return std::nullopt;
  }
  stages.erase("key");
  artifact.stages = std::move(stages);
  artifact.objects = std::move(objects);
  ::utimensat(AT_FDCWD, (entry / "meta").c_str(), nullptr, 0); // recently used
  return artifact;
}

void DiskCache::store(const std::string &key, const std::string &summary,
                      const KernelArtifact &artifact) {
  if (!writable_)
    return;
  fs::path entry = entryDir(key);
  fs::path temp = settings_.dir + "/.tmp-" + fnv1aHex(key) + "-" + uniqueWriterSuffix();
  std::error_code ec;
  if (!fs::create_directory(temp, ec)) {
    warnOnce("cannot write to the cache directory '" + settings_.dir + "': " + ec.message());
    return;
  }
  std::string stagesText;
  appendSection(stagesText, "key", key);
  for (const auto &[name, text] : artifact.stages)
    appendSection(stagesText, name, text);
  const Shape &s = artifact.shape;
  std::string meta = std::string(kMetaHeader) + "\n";
  meta += "fingerprint " + compilerFingerprint() + "\n";
  meta += "summary " + summary + "\n";
  meta += "created " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count()) +
          "\n";
  meta += "shape " + std::to_string(s.batch) + " " + std::to_string(s.queryHeads) + " " +
          std::to_string(s.kvHeads) + " " + std::to_string(s.querySeq) + " " +
          std::to_string(s.keySeq) + " " + std::to_string(s.headDim) + " " +
          std::to_string(s.valueDim) + "\n";
  meta += "arguments " + artifact.signature.str() + "\n";
  meta += "items " + std::to_string(artifact.items) + "\n";
  meta += "scratch " + std::to_string(artifact.scratchFloats) + "\n";
  meta += "prepare-jobs " + std::to_string(artifact.prepareJobs) + "\n";
  meta += "call-plan " + std::to_string(artifact.queryTile) + " " +
          std::to_string(artifact.keyTile) + " " + std::to_string(artifact.keyCacheTile) + " " +
          std::to_string(artifact.tableFloatsPerQueryPosition) + " " +
          std::to_string(artifact.tableFloatsPerKeyPosition) + " " +
          std::to_string(artifact.decodeGroup) + " " + std::to_string(artifact.rowScratchFloats) +
          "\n";
  if (!artifact.isa.empty())
    meta += "isa " + artifact.isa + " " + std::to_string(artifact.lanes) + "\n";
  meta += "dtypes " + std::string(dtypeName(artifact.inputDtype)) + " " +
          dtypeName(artifact.outputDtype) + "\n";
  meta += "position-rows " + std::to_string(artifact.queryPositionRows) + " " +
          std::to_string(artifact.keyPositionRows) + " " + std::to_string(artifact.positionAxes) +
          " " + std::to_string(artifact.positionLimit) + "\n";
  for (size_t i = 0; i < artifact.objects.size(); ++i)
    meta += "file " + objectFileName(i) + " " + std::to_string(artifact.objects[i].size()) + " " +
            fnv1aHex(artifact.objects[i]) + "\n";
  meta += "file stages " + std::to_string(stagesText.size()) + " " + fnv1aHex(stagesText) + "\n";
  meta += "checksum " + fnv1aHex(meta) + "\n";
  bool written = !artifact.objects.empty();
  for (size_t i = 0; written && i < artifact.objects.size(); ++i)
    written = writeFileSynced(temp / objectFileName(i), artifact.objects[i]);
  written = written && writeFileSynced(temp / "stages", stagesText) &&
            writeFileSynced(temp / "meta", meta);
  fsyncDir(temp);
  // rename() of a directory onto an existing non-empty one fails: another
  // process stored the same key first, and its entry is as good as ours.
  if (!written || ::rename(temp.c_str(), entry.c_str()) != 0) {
    if (!written)
      warnOnce("cannot write a cache entry in '" + settings_.dir + "': " + std::strerror(errno));
    fs::remove_all(temp, ec);
    return;
  }
  fsyncDir(settings_.dir);
  evict();
}

void DiskCache::discard(const std::string &key, const std::string &why) {
  warnOnce("cache entry " + fnv1aHex(key) + " in '" + settings_.dir + "' is damaged (" + why +
           "); removed, recompiling");
  if (writable_)
    removeEntryDir(entryDir(key));
}

void DiskCache::dumpStages(const std::string &key, const KernelArtifact &artifact) const {
  if (settings_.dumpIrDir.empty())
    return;
  fs::path dir = fs::path(settings_.dumpIrDir) / fnv1aHex(key);
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const auto &[name, text] : artifact.stages) {
    fs::path file = dir / (name + ".mlir");
    fs::remove(file, ec);
    if (!writeFileSynced(file, text))
      warnOnce("PEJIT_DUMP_IR: cannot write '" + file.string() + "'");
  }
}

} // namespace pejit
