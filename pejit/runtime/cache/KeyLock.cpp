// The disk cache's lock per kernel key (<dir>/<hash>.lock, flock), so that
// processes asking for one key compile it once.
#include "pejit/runtime/cache/DiskCache.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

namespace pejit {

// The lock file goes with the lock, so one is not left per entry forever.
// A process that opened it before the unlink still gets the lock and then
// finds the entry stored; one that comes after makes a new file. At worst
// two processes compile one key (its store is atomic either way).
DiskCache::KeyLock::~KeyLock() {
  ::unlink(path_.c_str());
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

// A compile takes well under a second; a holder that keeps the lock for
// minutes is stuck (stopped in a debugger, suspended, on a hung file
// system), and waiting on it forever would hang this process too. So: poll,
// say after a few seconds who we wait for, and past the timeout compile
// without the lock (the entry is still stored atomically).
std::unique_ptr<DiskCache::KeyLock> DiskCache::lockKey(const std::string &key) {
  if (!writable_)
    return nullptr;
  std::string path = entryDir(key) + ".lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return nullptr;
  auto start = std::chrono::steady_clock::now();
  double timeout = settings_.lockTimeoutSeconds;
  double announceAfter = std::min(5.0, timeout / 2);
  bool announced = false;
  for (int attempt = 0;; ++attempt) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
      return std::make_unique<KeyLock>(fd, path);
    if (errno == EINTR)
      continue;
    if (errno != EWOULDBLOCK) {
      ::close(fd);
      return nullptr;
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!announced && waited >= announceAfter) {
      std::fprintf(stderr,
                   "pejit: waiting for another process that compiles kernel %s (lock '%s'); "
                   "compiling it here after %g s\n",
                   fnv1aHex(key).c_str(), path.c_str(), timeout);
      announced = true;
    }
    if (waited >= timeout) {
      warnOnce("gave up after " + std::to_string(static_cast<int64_t>(timeout)) +
               " s waiting for the lock '" + path + "'; compiling the kernel in this process");
      ::close(fd);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, 5 + 5 * attempt)));
  }
}

} // namespace pejit
