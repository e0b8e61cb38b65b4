//===- NpyTestSupport.h - seeds, temp dirs and .npy byte builders ----------===//
//
// Like tests/unit, every test draws fresh random data from a random_device
// seed that failures report; PEJIT_TEST_SEED=<seed> replays it.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_TESTS_NPY_NPYTESTSUPPORT_H
#define PEJIT_TESTS_NPY_NPYTESTSUPPORT_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <stdlib.h> // mkdtemp

namespace pejit::npytest {

class SeededRng {
public:
  SeededRng() : seed_(pickSeed()), engine_(seed_) {}
  std::string trace() const {
    return "random seed " + std::to_string(seed_) +
           " (replay with PEJIT_TEST_SEED=" + std::to_string(seed_) + ")";
  }
  uint32_t bits() { return engine_(); }
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(engine_);
  }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> out(n);
    for (auto &b : out)
      b = static_cast<uint8_t>(engine_());
    return out;
  }

private:
  static uint32_t pickSeed() {
    if (const char *s = std::getenv("PEJIT_TEST_SEED"))
      return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
    return std::random_device{}();
  }
  uint32_t seed_;
  std::mt19937 engine_;
};

/// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pejit-npy-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto &e : std::filesystem::directory_iterator(path_, ec))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

private:
  std::string path_;
};

/// .npy bytes with a hand-written header dict: magic, version, little-endian
/// length (2 bytes for v1, 4 for v2/v3), dict padded with spaces and '\n' so
/// the data starts at a multiple of align.
inline std::vector<uint8_t> buildNpy(const std::string &dict, const std::vector<uint8_t> &data,
                                     int major = 1, size_t align = 64) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % align != 0)
    header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline std::string readFileBytes(const std::string &path) {
  std::string s;
  if (FILE *f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

inline void writeFileBytes(const std::string &path, const void *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (size > 0) { // fwrite's buffer must not be null, even for 0 bytes
    ASSERT_EQ(std::fwrite(data, 1, size, f), size);
  }
  std::fclose(f);
}

} // namespace pejit::npytest

#endif // PEJIT_TESTS_NPY_NPYTESTSUPPORT_H
