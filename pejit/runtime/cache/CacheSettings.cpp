// The disk cache's settings from the environment (README, "Environment
// variables"), each checked: a bad value is a warning and the default.
#include "pejit/runtime/cache/DiskCache.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace pejit {

CacheSettings CacheSettings::fromEnvironment() {
  CacheSettings settings;
  const char *disable = std::getenv("PEJIT_DISABLE_CACHE");
  settings.enabled = !(disable && *disable && std::string(disable) != "0");
  if (const char *dir = std::getenv("PEJIT_CACHE_DIR"); dir && *dir)
    settings.dir = dir;
  else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    settings.dir = std::string(xdg) + "/pejit";
  else if (const char *home = std::getenv("HOME"); home && *home)
    settings.dir = std::string(home) + "/.cache/pejit";
  if (const char *mb = std::getenv("PEJIT_CACHE_MAX_MB"); mb && *mb) {
    // At most 2^30 MB (1 PiB), so the byte count cannot overflow: before
    // this bound, 9999999999999 wrapped negative and evicted every entry as
    // soon as it was written.
    constexpr long long kMaxMegabytes = 1ll << 30;
    char *end = nullptr;
    errno = 0;
    long long value = std::strtoll(mb, &end, 10);
    if (end && *end == '\0' && errno == 0 && value >= 0 && value <= kMaxMegabytes) {
      settings.maxBytes = static_cast<int64_t>(value) << 20;
      if (value == 0)
        warnOnce("PEJIT_CACHE_MAX_MB=0 keeps no kernel on disk (PEJIT_DISABLE_CACHE=1 says so "
                 "directly)");
    } else {
      warnOnce(std::string("PEJIT_CACHE_MAX_MB='") + mb +
               "' is not an integer in [0, 1073741824]; using 1024");
    }
  }
  if (const char *timeout = std::getenv("PEJIT_CACHE_LOCK_TIMEOUT"); timeout && *timeout) {
    char *end = nullptr;
    double seconds = std::strtod(timeout, &end);
    if (end && *end == '\0' && seconds > 0 && seconds <= 86400)
      settings.lockTimeoutSeconds = seconds;
    else
      warnOnce(std::string("PEJIT_CACHE_LOCK_TIMEOUT='") + timeout +
               "' is not a number of seconds in (0, 86400]; using 60");
  }
  if (const char *dump = std::getenv("PEJIT_DUMP_IR"))
    settings.dumpIrDir = dump;
  return settings;
}

} // namespace pejit
