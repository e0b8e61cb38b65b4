// Helpers of the pejit CLI tests: a temp dir, fresh random tensors (seed in
// failures; PEJIT_TEST_SEED replays), .npy writing, running the pejit binary
// and comparing with the float64 reference.
#ifndef PEJIT_TESTS_CLI_CLITESTSUPPORT_H
#define PEJIT_TESTS_CLI_CLITESTSUPPORT_H

#include "pejit/reference/Attention.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/reference/Tensor.h"
#include "pejit/runtime/npy/Npy.h"

#include "gtest/gtest.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace pejit::clitest {

/// A fresh directory under the system temp dir, removed with the object.
class TempDir {
public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pejit-cli-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (char *made = mkdtemp(buffer.data()))
      path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }
  bool ok() const { return !path_.empty(); }

private:
  std::string path_;
};

inline uint32_t testSeed() {
  static uint32_t seed = [] {
    if (const char *env = std::getenv("PEJIT_TEST_SEED"))
      return static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
    return std::random_device{}();
  }();
  return seed;
}

inline std::string seedTrace() {
  return "random seed " + std::to_string(testSeed()) +
         " (replay with PEJIT_TEST_SEED=" + std::to_string(testSeed()) + ")";
}

inline std::mt19937 &rng() {
  static std::mt19937 engine(testSeed());
  return engine;
}

/// Uniform in [-1, 1), rounded to float so the f32 file holds the same values.
inline ref::Tensor randomTensor(std::vector<int64_t> shape) {
  ref::Tensor t(std::move(shape));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (double &x : t.data)
    x = dist(rng());
  return t;
}

inline void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string readText(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

inline void writeTensor(const std::string &path, const ref::Tensor &t,
                        npy::DType dtype = npy::DType::F32) {
  std::vector<float> values(t.data.begin(), t.data.end());
  ASSERT_EQ(npy::writeNpy(path, npy::fromFloat32(values, t.shape, dtype)), "");
}

inline void writeIds(const std::string &path, const ref::PositionIds &ids, npy::DType dtype) {
  ASSERT_EQ(npy::writeNpy(path, npy::fromInt64(ids.data, ids.shape, dtype)), "");
}

struct Result {
  int exitCode = -1;
  std::string out, err;
};

inline std::string quote(const std::string &arg) {
  std::string quoted = "'";
  for (char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// Runs the pejit binary with `args`; stdout/stderr are captured in `dir`.
inline Result runPejit(const TempDir &dir, const std::vector<std::string> &args) {
  std::string command = quote(PEJIT_BINARY);
  for (const std::string &arg : args)
    command += " " + quote(arg);
  std::string outPath = dir.file("stdout.txt"), errPath = dir.file("stderr.txt");
  command += " >" + quote(outPath) + " 2>" + quote(errPath);
  int status = std::system(command.c_str());
  Result result;
  result.exitCode = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = readText(outPath);
  result.err = readText(errPath);
  return result;
}

/// max |out - ref| / max |ref| (NaN counts as infinite).
inline double relativeError(const std::vector<double> &out, const ref::Tensor &expected) {
  if (out.size() != expected.data.size())
    return std::numeric_limits<double>::infinity();
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    double err = std::fabs(out[i] - expected.data[i]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  return maxErr / std::max(maxRef, 1e-300);
}

/// RoPE (explicit query/key position ids, i32 and i64) + ALiBi + GQA 4/2 +
/// causal with sq < skv, as a user writes it (unfused).
inline const char *kRopeAlibiSource = R"mlir(
func.func @attn(%q: tensor<1x4x48x64xf32>, %k: tensor<1x2x64x64xf32>,
                %v: tensor<1x2x64x64xf32>, %qpos: tensor<48xi32>, %kpos: tensor<64xi64>)
    -> tensor<1x4x48x64xf32> {
  %qr = pe.rope %q, %qpos <layout = half, theta = 10000.0>
      : tensor<1x4x48x64xf32>, tensor<48xi32>
  %kr = pe.rope %k, %kpos <layout = half, theta = 10000.0>
      : tensor<1x2x64x64xf32>, tensor<64xi64>
  %bias = pe.alibi <num_heads = 4, form = causal> : tensor<1x4x48x64xf32>
  %o = attn.attention %qr, %kr, %v bias(%bias : tensor<1x4x48x64xf32>) causal
      : tensor<1x4x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>
      -> tensor<1x4x48x64xf32>
  return %o : tensor<1x4x48x64xf32>
}
)mlir";

/// The same attention in the fused form (what pe-fuse-into-attention makes).
inline const char *kRopeAlibiFused = R"mlir(
func.func @attn(%q: tensor<1x4x48x64xf32>, %k: tensor<1x2x64x64xf32>,
                %v: tensor<1x2x64x64xf32>, %qpos: tensor<48xi32>, %kpos: tensor<64xi64>)
    -> tensor<1x4x48x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%qpos : tensor<48xi32>)
      key_positions(%kpos : tensor<64xi64>) causal scale(0.125)
      encodings([#pe.rope<layout = half, theta = 10000.0>,
                 #pe.alibi<num_heads = 4, form = causal>])
      : tensor<1x4x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>
      -> tensor<1x4x48x64xf32>
  return %o : tensor<1x4x48x64xf32>
}
)mlir";

/// kRopeAlibiSource with direct ref:: calls.
inline ref::Tensor ropeAlibiReference(const ref::Tensor &q, const ref::Tensor &k,
                                      const ref::Tensor &v, const ref::PositionIds &qIds,
                                      const ref::PositionIds &kIds) {
  ref::RopeConfig rope;
  rope.layout = ref::RopeLayout::Half;
  rope.theta = 10000.0;
  int64_t seqLen = ref::maxPositionPlusOne(qIds, kIds);
  ref::Tensor bias = ref::alibiBias(4, 0, 4, ref::AlibiForm::Causal, 48, 64);
  ref::AttentionOptions options;
  options.causal = true;
  options.bias = &bias;
  return ref::attention(ref::applyRope(rope, q, qIds, seqLen),
                        ref::applyRope(rope, k, kIds, seqLen), v, options);
}

/// Position ids first, first+1, ... (length n).
inline ref::PositionIds consecutiveIds(int64_t first, int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = first + i;
  return ref::PositionIds::shared(ids);
}

} // namespace pejit::clitest

#endif // PEJIT_TESTS_CLI_CLITESTSUPPORT_H
