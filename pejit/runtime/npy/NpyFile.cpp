//===- NpyFile.cpp - reading and atomically writing .npy files -------------===//
//
// POSIX file I/O around parseNpy/serializeNpy. Every failure becomes a
// message with the path and strerror; nothing throws or aborts.
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/npy/Npy.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pejit::npy {

namespace {

/// Appends up to `count` bytes read from `fd` to `out`; false (with errno
/// set) on a read error. Fewer bytes only at the end of the file.
bool readUpTo(int fd, uint64_t count, std::vector<uint8_t> &out) {
  uint8_t chunk[1 << 16];
  while (count > 0) {
    ssize_t n = ::read(fd, chunk, static_cast<size_t>(std::min<uint64_t>(count, sizeof chunk)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return false;
    if (n == 0)
      break;
    out.insert(out.end(), chunk, chunk + n);
    count -= static_cast<uint64_t>(n);
  }
  return true;
}

/// Removes `<dir><stem><pid>-<n>` files of writers that were killed before
/// their rename (their pid is no process any more), so outputs written
/// again and again do not pile up hidden temporaries.
void removeDeadWritersTemps(const std::string &dirPrefix, const std::string &stem) {
  DIR *dir = ::opendir(dirPrefix.empty() ? "." : dirPrefix.c_str());
  if (!dir)
    return;
  std::vector<std::string> stale;
  while (const struct dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.compare(0, stem.size(), stem) != 0)
      continue;
    std::string rest = name.substr(stem.size());
    size_t dash = rest.find('-');
    std::string digits = rest.substr(0, dash);
    if (dash == std::string::npos || digits.empty() ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    pid_t pid = static_cast<pid_t>(std::strtol(digits.c_str(), nullptr, 10));
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH)
      stale.push_back(dirPrefix + name);
  }
  ::closedir(dir);
  for (const std::string &file : stale)
    ::unlink(file.c_str());
}

} // namespace

// Preamble, then header, then exactly the data the header declares: nothing
// is read (or allocated) on the word of a file before its header checks out.
Expected<Array> readNpy(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Expected<Array>::failure(path + ": cannot open: " + std::strerror(errno));
  auto fail = [&](std::string message) {
    ::close(fd);
    return Expected<Array>::failure(std::move(message));
  };
  auto readError = [&] { return fail(path + ": cannot read: " + std::strerror(errno)); };
  std::vector<uint8_t> contents;
  if (!readUpTo(fd, 12, contents))
    return readError();
  Expected<NpyPreamble> preamble = parseNpyPreamble(contents.data(), contents.size(), path);
  if (!preamble)
    return fail(preamble.error);
  uint64_t headerEnd = preamble->headerStart + preamble->headerLength;
  if (!readUpTo(fd, headerEnd - contents.size(), contents))
    return readError();
  Expected<NpyHeader> header = parseNpyHeader(contents.data(), contents.size(), path);
  if (!header)
    return fail(header.error);
  // A regular file's size tells a short or long file before any data is read.
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) >= headerEnd)
    if (std::string problem = dataSizeProblem(*header, st.st_size - headerEnd); !problem.empty())
      return fail(path + ": " + problem);
  // One byte past the declared data tells a longer stream.
  if (!readUpTo(fd, header->dataBytes + 1, contents))
    return readError();
  ::close(fd);
  return parseNpy(contents.data(), contents.size(), path);
}

std::string writeNpy(const std::string &path, const Array &array) {
  if (std::string invalid = validateArray(array); !invalid.empty())
    return path + ": cannot write: " + invalid;
  std::vector<uint8_t> bytes = serializeNpy(array);
  if (path.empty() || path.back() == '/')
    return path + ": cannot write: not a file name";
  size_t slash = path.rfind('/');
  std::string dirPrefix = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  // Hidden, unique, beside the target so the rename stays in one filesystem;
  // the base is shortened so a long target name still leaves room (NAME_MAX).
  std::string stem = "." + path.substr(dirPrefix.size(), 200) + ".tmp-";
  removeDeadWritersTemps(dirPrefix, stem);
  std::string tempPrefix = dirPrefix + stem + std::to_string(::getpid()) + "-";
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temp = tempPrefix + std::to_string(counter++);
    // Mode 0666 lets the umask decide, as for a plain create.
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return path + ": cannot create a temporary file in '" + (dirPrefix.empty() ? "." : dirPrefix) +
           "': " + std::strerror(errno);

  auto abandon = [&](const char *what, int err) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(temp.c_str());
    return path + ": " + what + ": " + std::strerror(err);
  };
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return abandon("cannot write", errno);
    done += static_cast<size_t>(n);
  }
  // fsync before rename: otherwise a crash can leave the new name pointing
  // at an empty file.
  if (::fsync(fd) != 0 && errno != EINVAL)
    return abandon("cannot write", errno);
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0)
    return abandon("cannot write", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0)
    return abandon("cannot replace the file", errno);
  return "";
}

} // namespace pejit::npy
