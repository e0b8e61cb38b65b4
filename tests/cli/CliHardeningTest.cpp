// Reproducers of the hardening campaign (issue 13) as a user meets them on
// the command line: each is exit 1 with a message, never a crash.
#include "pejit/runtime/Pejit.h"
#include "tests/cli/CliTestSupport.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>

using namespace pejit;
using namespace pejit::clitest;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(PejitHardening, HugeTileIsAnErrorNotAStackOverflow) {
  TempDir dir;
  writeText(dir.file("attn.mlir"), kRopeAlibiSource);
  Result result = runPejit(dir, {"compile", dir.file("attn.mlir"), "--tile=48x99999996"});
  EXPECT_EQ(result.exitCode, 1) << result.err;
  EXPECT_TRUE(contains(result.err, "tile config (48, 99999996) is invalid: a work item's tiles"))
      << result.err;
}

TEST(PejitHardening, DevZeroAsAnInputFailsAtItsFirstBytes) {
  TempDir dir;
  writeText(dir.file("attn.mlir"), kRopeAlibiSource);
  Result result = runPejit(dir, {"run", dir.file("attn.mlir"), "--input=@/dev/zero",
                                 "--input=@/dev/zero", "--input=@/dev/zero"});
  EXPECT_EQ(result.exitCode, 1) << result.err;
  EXPECT_TRUE(contains(result.err, "/dev/zero: not a .npy file (bad magic)")) << result.err;
}

// A tuned config whose tiles no kernel takes: `cache verify` reports it
// (exit 1), and `run` warns, removes it and uses the default tiles.
TEST(PejitHardening, InvalidTunedConfigIsVerifiedAndReplaced) {
  TempDir dir;
  writeText(dir.file("attn.mlir"), kRopeAlibiSource);
  for (const char *name : {"q", "k", "v"})
    writeTensor(dir.file(std::string(name) + ".npy"),
                randomTensor(
                    {1, std::string(name) == "q" ? 4 : 2, std::string(name) == "q" ? 48 : 64, 64}));
  std::string env = "PEJIT_CACHE_DIR=" + quote(dir.file("cache")) + " ";
  auto pejit = [&](const std::string &args) {
    std::string command = "unset PEJIT_DISABLE_CACHE; " + env + quote(PEJIT_BINARY) + " " + args +
                          " >" + quote(dir.file("out.txt")) + " 2>" + quote(dir.file("err.txt"));
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(pejit("tune " + quote(dir.file("attn.mlir")) + " --candidates=48x48 --repeats=1"), 0)
      << readText(dir.file("err.txt"));
  std::filesystem::path tuned;
  for (const auto &item : std::filesystem::directory_iterator(dir.file("cache") + "/tuned"))
    if (item.path().filename().string()[0] != '.')
      tuned = item.path();
  ASSERT_FALSE(tuned.empty());
  std::string text = readText(tuned.string());
  text.replace(text.find("tile 48 48"), 10, "tile 7 5");
  std::ofstream(tuned) << text; // the checksum no longer matches either
  EXPECT_EQ(pejit("cache verify"), 1);
  EXPECT_TRUE(contains(readText(dir.file("out.txt")), "tuned/")) << readText(dir.file("out.txt"));
  EXPECT_TRUE(contains(readText(dir.file("out.txt")), "1 damaged"))
      << readText(dir.file("out.txt"));
  std::string run = "run " + quote(dir.file("attn.mlir"));
  for (const char *name : {"q", "k", "v"})
    run += " " + quote("--input=@" + dir.file(std::string(name) + ".npy"));
  EXPECT_EQ(pejit(run), 0) << readText(dir.file("err.txt"));
  EXPECT_TRUE(contains(readText(dir.file("err.txt")), "is damaged or invalid (checksum mismatch)"))
      << readText(dir.file("err.txt"));
  const X86TileConfig defaults = Runtime::defaultX86Tiles(); // the family's
  EXPECT_TRUE(contains(readText(dir.file("err.txt")), "(tiles " +
                                                          std::to_string(defaults.queryTile) + "x" +
                                                          std::to_string(defaults.keyTile) + ")"))
      << readText(dir.file("err.txt"));
  EXPECT_FALSE(std::filesystem::exists(tuned));
}

} // namespace
