// pejit tune and pejit cache as a user runs them, and four pejit processes
// started at once on one kernel key sharing one disk cache.
#include "tests/cli/CliTestSupport.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <optional>

using namespace pejit;
using namespace pejit::clitest;

namespace {

/// `pejit ARGS` with PEJIT_CACHE_DIR=<dir>/cache (the suite's environment
/// may disable the cache; these tests turn it on for their own directory).
Result runWithCache(const TempDir &dir, std::vector<std::string> args) {
  auto saved = [](const char *name) -> std::optional<std::string> {
    const char *value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  std::optional<std::string> cacheDir = saved("PEJIT_CACHE_DIR"),
                             disable = saved("PEJIT_DISABLE_CACHE");
  setenv("PEJIT_CACHE_DIR", dir.file("cache").c_str(), 1);
  unsetenv("PEJIT_DISABLE_CACHE");
  Result result = runPejit(dir, args);
  // Later tests see the suite's environment again.
  cacheDir ? setenv("PEJIT_CACHE_DIR", cacheDir->c_str(), 1) : unsetenv("PEJIT_CACHE_DIR");
  disable ? setenv("PEJIT_DISABLE_CACHE", disable->c_str(), 1) : unsetenv("PEJIT_DISABLE_CACHE");
  return result;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

struct Inputs {
  TempDir dir;
  ref::Tensor q = randomTensor({1, 4, 48, 64}), k = randomTensor({1, 2, 64, 64}),
              v = randomTensor({1, 2, 64, 64});
  ref::PositionIds qIds = consecutiveIds(1016, 48), kIds = consecutiveIds(1000, 64);
  Inputs() {
    writeText(dir.file("attn.mlir"), kRopeAlibiSource);
    writeTensor(dir.file("q.npy"), q);
    writeTensor(dir.file("k.npy"), k);
    writeTensor(dir.file("v.npy"), v);
    writeIds(dir.file("qpos.npy"), qIds, npy::DType::I32);
    writeIds(dir.file("kpos.npy"), kIds, npy::DType::I64);
  }
  std::string runCommand(const std::string &output) const {
    std::string command = "PEJIT_CACHE_DIR=" + quote(dir.file("cache")) + " " +
                          quote(PEJIT_BINARY) + " run " + quote(dir.file("attn.mlir"));
    for (const char *name : {"q.npy", "k.npy", "v.npy", "qpos.npy", "kpos.npy"})
      command += " " + quote("--input=@" + dir.file(name));
    return command + " " + quote("--output=@" + output);
  }
};

TEST(PejitCache, FourProcessesOnOneKeyCompileOnceAndAgree) {
  SCOPED_TRACE(seedTrace());
  Inputs in;
  ASSERT_TRUE(in.dir.ok());
  // Four processes at once; each records its exit code.
  std::string script;
  for (int p = 0; p < 4; ++p) {
    std::string id = std::to_string(p);
    script += "(" + in.runCommand(in.dir.file("o" + id + ".npy")) + " 2>" +
              quote(in.dir.file("err" + id)) + "; echo $? >" + quote(in.dir.file("rc" + id)) +
              ") & ";
  }
  script += "wait";
  ASSERT_EQ(std::system(("unset PEJIT_DISABLE_CACHE; " + script).c_str()), 0);
  ref::Tensor expected = ropeAlibiReference(in.q, in.k, in.v, in.qIds, in.kIds);
  int loaded = 0;
  for (int p = 0; p < 4; ++p) {
    std::string id = std::to_string(p);
    EXPECT_EQ(readText(in.dir.file("rc" + id)), "0\n") << readText(in.dir.file("err" + id));
    loaded += contains(readText(in.dir.file("err" + id)), "loaded from the disk cache");
    npy::Expected<npy::Array> out = npy::readNpy(in.dir.file("o" + id + ".npy"));
    ASSERT_TRUE(out) << out.error;
    std::vector<float> values = npy::toFloat32(*out);
    EXPECT_LE(relativeError(std::vector<double>(values.begin(), values.end()), expected), 1e-4);
  }
  // The key's lock file: one compiles, the three others wait and load.
  EXPECT_EQ(loaded, 3);
  Result stats = runWithCache(in.dir, {"cache", "stats"});
  ASSERT_EQ(stats.exitCode, 0) << stats.err;
  EXPECT_TRUE(contains(stats.out, "entries 1\n")) << stats.out;
  EXPECT_TRUE(contains(stats.out, "hits 3\n")) << stats.out;
  EXPECT_TRUE(contains(stats.out, "misses 1\n")) << stats.out;
  Result verify = runWithCache(in.dir, {"cache", "verify"});
  EXPECT_EQ(verify.exitCode, 0) << verify.out << verify.err;
  EXPECT_TRUE(contains(verify.out, "[ok]")) << verify.out;
}

TEST(PejitCache, VerifyFindsADamagedEntryAndClearEmptiesTheCache) {
  Inputs in;
  ASSERT_EQ(std::system(("unset PEJIT_DISABLE_CACHE; " + in.runCommand(in.dir.file("o.npy")) +
                         " 2>/dev/null")
                            .c_str()),
            0);
  for (const auto &entry : std::filesystem::directory_iterator(in.dir.file("cache")))
    if (entry.is_directory())
      std::ofstream(entry.path() / "kernel.o", std::ios::app) << "tail";
  Result verify = runWithCache(in.dir, {"cache", "verify"});
  EXPECT_EQ(verify.exitCode, 1) << verify.out;
  EXPECT_TRUE(contains(verify.out, "1 damaged")) << verify.out;
  EXPECT_TRUE(contains(verify.err, "kernel.o is truncated or grown")) << verify.err;
  Result ls = runWithCache(in.dir, {"cache", "ls"});
  EXPECT_TRUE(contains(ls.out, "hq=4 hkv=2 sq=48 skv=64")) << ls.out;
  Result clear = runWithCache(in.dir, {"cache", "clear"});
  EXPECT_TRUE(contains(clear.out, "removed 1 entries")) << clear.out;
  Result after = runWithCache(in.dir, {"cache", "stats"});
  EXPECT_TRUE(contains(after.out, "entries 0\n")) << after.out;
  Result bad = runWithCache(in.dir, {"cache", "shrink"});
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_TRUE(contains(bad.err, "unknown action 'shrink'")) << bad.err;
}

TEST(PejitTune, PrintsATableStoresTheBestAndRunUsesIt) {
  Inputs in;
  Result tune =
      runWithCache(in.dir, {"tune", in.dir.file("attn.mlir"), "--candidates=48x48,96x72,nonsense"});
  EXPECT_EQ(tune.exitCode, 2) << tune.err; // a malformed candidate is a usage error
  EXPECT_TRUE(contains(tune.err, "candidate 'nonsense'")) << tune.err;
  tune = runWithCache(
      in.dir, {"tune", in.dir.file("attn.mlir"), "--candidates=48x48,96x72", "--repeats=2"});
  ASSERT_EQ(tune.exitCode, 0) << tune.err;
  EXPECT_TRUE(contains(tune.out, "| 48x48 |")) << tune.out;
  EXPECT_TRUE(contains(tune.out, "| 96x72 |")) << tune.out;
  size_t at = tune.out.find("best: ");
  ASSERT_NE(at, std::string::npos) << tune.out;
  std::string best = tune.out.substr(at + 6, tune.out.find(' ', at + 6) - at - 6);
  // Not a terminal: no progress bar in the output.
  EXPECT_FALSE(contains(tune.err, "tuning [")) << tune.err;
  std::string command = "unset PEJIT_DISABLE_CACHE; " + in.runCommand(in.dir.file("o.npy")) +
                        " 2>" + quote(in.dir.file("run.err"));
  ASSERT_EQ(std::system(command.c_str()), 0) << readText(in.dir.file("run.err"));
  EXPECT_TRUE(contains(readText(in.dir.file("run.err")), "(tiles " + best + ")"))
      << readText(in.dir.file("run.err")) << " best " << best;
}

} // namespace
