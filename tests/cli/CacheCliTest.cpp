// pejit tune and pejit cache as a user runs them, and four pejit processes
// started at once on one kernel key sharing one disk cache.
#include "tests/cli/CliTestSupport.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>

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

// A source with `?` lengths (a shape class, docs/shape-classes.md): `pejit
// run` at two lengths, each checked against the float64 interpreter
// (--check, fresh random inputs, the default position ids), compiles once; the cache holds one
// entry, listed with its `?` lengths, and the second run loads it.
constexpr const char *kShapeClassSource = R"mlir(
func.func @attn(%q: tensor<1x4x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>,
                %qpos: tensor<?xi64>, %kpos: tensor<?xi64>) -> tensor<1x4x?x64xf32> {
  %qr = pe.rope %q, %qpos <layout = half, theta = 10000.0> : tensor<1x4x?x64xf32>, tensor<?xi64>
  %kr = pe.rope %k, %kpos <layout = half, theta = 10000.0> : tensor<1x2x?x64xf32>, tensor<?xi64>
  %o = attn.attention %qr, %kr, %v causal
      : tensor<1x4x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x4x?x64xf32>
  return %o : tensor<1x4x?x64xf32>
}
)mlir";

TEST(PejitCache, OneShapeClassEntryServesTwoLengths) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeText(dir.file("attn.mlir"), kShapeClassSource);
  for (auto [sq, skv, tag] :
       {std::tuple<int64_t, int64_t, const char *>{48, 64, "a"}, {1, 333, "b"}}) {
    std::string t = tag;
    writeTensor(dir.file("q" + t + ".npy"), randomTensor({1, 4, sq, 64}));
    writeTensor(dir.file("k" + t + ".npy"), randomTensor({1, 2, skv, 64}));
    writeTensor(dir.file("v" + t + ".npy"), randomTensor({1, 2, skv, 64}));
    Result run = runWithCache(
        dir, {"run", dir.file("attn.mlir"), "--input=@" + dir.file("q" + t + ".npy"),
              "--input=@" + dir.file("k" + t + ".npy"), "--input=@" + dir.file("v" + t + ".npy"),
              "--check", "--output=@" + dir.file("o" + t + ".npy")});
    ASSERT_EQ(run.exitCode, 0) << run.err << run.out;
    EXPECT_TRUE(contains(run.out, "max relative error")) << run.out;
    npy::Expected<npy::Array> out = npy::readNpy(dir.file("o" + t + ".npy"));
    ASSERT_TRUE(out) << out.error;
    EXPECT_EQ(out->shape, (std::vector<int64_t>{1, 4, sq, 64}));
    if (t == "b")
      EXPECT_TRUE(contains(run.err, "loaded from the disk cache")) << run.err;
  }
  Result ls = runWithCache(dir, {"cache", "ls"});
  ASSERT_EQ(ls.exitCode, 0) << ls.err;
  EXPECT_TRUE(contains(ls.out, ": 1 entries")) << ls.out;
  EXPECT_TRUE(contains(ls.out, "hq=4 hkv=2 sq=? skv=? d=64")) << ls.out;
  Result verify = runWithCache(dir, {"cache", "verify"});
  EXPECT_EQ(verify.exitCode, 0) << verify.out << verify.err;
}

// A packed batch (segments, docs/shape-classes.md) through `pejit run`:
// three sequences of lengths (5, 5), (1, 40) and (64, 64) packed into one
// row, the offsets as i32 .npy files; --check runs the float64 interpreter
// per sequence. A second batch of other lengths reuses the one entry.
constexpr const char *kPackedSource = R"mlir(
func.func @attn(%q: tensor<1x4x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>,
                %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>) -> tensor<1x4x?x64xf32> {
  %o = attn.attention %q, %k, %v segments(%cu_q, %cu_k : tensor<?xi32>, tensor<?xi32>) causal
      : tensor<1x4x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x4x?x64xf32>
  return %o : tensor<1x4x?x64xf32>
}
)mlir";

TEST(PejitCache, PackedBatchRunsAndChecksPerSequence) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeText(dir.file("packed.mlir"), kPackedSource);
  using Offsets = std::vector<int64_t>;
  for (auto [cuQ, cuK, tag] :
       {std::tuple<Offsets, Offsets, const char *>{{0, 5, 6, 70}, {0, 5, 45, 109}, "a"},
        {{0, 300, 301}, {0, 300, 1301}, "b"}}) {
    std::string t = tag;
    writeTensor(dir.file("q" + t + ".npy"), randomTensor({1, 4, cuQ.back(), 64}));
    writeTensor(dir.file("k" + t + ".npy"), randomTensor({1, 2, cuK.back(), 64}));
    writeTensor(dir.file("v" + t + ".npy"), randomTensor({1, 2, cuK.back(), 64}));
    writeIds(dir.file("cuq" + t + ".npy"), ref::PositionIds::shared(cuQ), npy::DType::I32);
    writeIds(dir.file("cuk" + t + ".npy"), ref::PositionIds::shared(cuK), npy::DType::I32);
    Result run = runWithCache(
        dir,
        {"run", dir.file("packed.mlir"), "--input=@" + dir.file("q" + t + ".npy"),
         "--input=@" + dir.file("k" + t + ".npy"), "--input=@" + dir.file("v" + t + ".npy"),
         "--input=@" + dir.file("cuq" + t + ".npy"), "--input=@" + dir.file("cuk" + t + ".npy"),
         "--check", "--output=@" + dir.file("o" + t + ".npy")});
    ASSERT_EQ(run.exitCode, 0) << run.err << run.out;
    EXPECT_TRUE(contains(run.out, "max relative error")) << run.out;
  }
  Result ls = runWithCache(dir, {"cache", "ls"});
  EXPECT_TRUE(contains(ls.out, ": 1 entries")) << ls.out;
  // A decreasing offset is an error naming the input and the index.
  writeIds(dir.file("bad.npy"), ref::PositionIds::shared({0, 50, 40, 109}), npy::DType::I32);
  Result bad =
      runWithCache(dir, {"run", dir.file("packed.mlir"), "--input=@" + dir.file("qa.npy"),
                         "--input=@" + dir.file("ka.npy"), "--input=@" + dir.file("va.npy"),
                         "--input=@" + dir.file("cuqa.npy"), "--input=@" + dir.file("bad.npy")});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_TRUE(contains(bad.err, "key_segments (cu_seqlens_k): entry 2 (40) is less than entry 1"))
      << bad.err;
}

// The shipped paged-decode and varlen-prefill examples as a user runs
// them: `pejit run --check` on .npy inputs (a shuffled block table whose
// unread entries point past the pool; packed offsets), each checked
// against the float64 interpreter.
TEST(Examples, PagedDecodeVarlenPrefillAndKvAppendRunAndCheck) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string examples = EXAMPLES_DIR;
  writeTensor(dir.file("q.npy"), randomTensor({3, 32, 1, 128}));
  writeTensor(dir.file("kp.npy"), randomTensor({7, 16, 8, 128}));
  writeTensor(dir.file("vp.npy"), randomTensor({7, 16, 8, 128}));
  writeIds(dir.file("table.npy"), ref::PositionIds({3, 3}, {6, 2, 99, 0, 99, 99, 5, 1, 3}),
           npy::DType::I32);
  writeIds(dir.file("lens.npy"), ref::PositionIds::shared({20, 9, 48}), npy::DType::I32);
  Result paged = runWithCache(
      dir, {"run", examples + "/paged_decode.mlir", "--input=@" + dir.file("q.npy"),
            "--input=@" + dir.file("kp.npy"), "--input=@" + dir.file("vp.npy"),
            "--input=@" + dir.file("table.npy"), "--input=@" + dir.file("lens.npy"), "--check"});
  ASSERT_EQ(paged.exitCode, 0) << paged.err << paged.out;
  EXPECT_TRUE(contains(paged.out, "max relative error")) << paged.out;

  writeTensor(dir.file("pq.npy"), randomTensor({1, 32, 70, 128}));
  writeTensor(dir.file("pk.npy"), randomTensor({1, 8, 70, 128}));
  writeTensor(dir.file("pv.npy"), randomTensor({1, 8, 70, 128}));
  writeIds(dir.file("cu.npy"), ref::PositionIds::shared({0, 5, 6, 70}), npy::DType::I32);
  Result varlen = runWithCache(
      dir, {"run", examples + "/varlen_prefill.mlir", "--input=@" + dir.file("pq.npy"),
            "--input=@" + dir.file("pk.npy"), "--input=@" + dir.file("pv.npy"),
            "--input=@" + dir.file("cu.npy"), "--input=@" + dir.file("cu.npy"), "--check"});
  ASSERT_EQ(varlen.exitCode, 0) << varlen.err << varlen.out;
  EXPECT_TRUE(contains(varlen.out, "max relative error")) << varlen.out;

  // Linear attention with RoPE on the numerator, at a length that is not a
  // multiple of its 16-row tiles.
  for (const char *name : {"lq.npy", "lk.npy", "lv.npy"})
    writeTensor(dir.file(name), randomTensor({1, 8, 50, 64}));
  Result linear = runWithCache(
      dir, {"run", examples + "/linear_attention_rope.mlir", "--input=@" + dir.file("lq.npy"),
            "--input=@" + dir.file("lk.npy"), "--input=@" + dir.file("lv.npy"), "--check"});
  ASSERT_EQ(linear.exitCode, 0) << linear.err << linear.out;
  EXPECT_TRUE(contains(linear.out, "max relative error")) << linear.out;

  // The KV-append kernel on its own, at two lengths: one disk entry.
  for (int64_t rows : {1, 37}) {
    writeTensor(dir.file("newk.npy"), randomTensor({2, 8, rows, 128}));
    std::vector<int64_t> at;
    for (int64_t r = 0; r < rows; ++r)
      at.push_back(4000 + 3 * r);
    writeIds(dir.file("at.npy"), ref::PositionIds::shared(at), npy::DType::I64);
    Result append =
        runWithCache(dir, {"run", examples + "/kv_append.mlir", "--input=@" + dir.file("newk.npy"),
                           "--input=@" + dir.file("at.npy"), "--check"});
    ASSERT_EQ(append.exitCode, 0) << append.err << append.out;
    EXPECT_TRUE(contains(append.out, "max relative error")) << append.out;
    EXPECT_TRUE(contains(append.err, "(standalone kernel)")) << append.err;
  }
  Result ls = runWithCache(dir, {"cache", "ls"});
  EXPECT_TRUE(contains(ls.out, "kv_append.mlir")) << ls.out;
  size_t entries = 0;
  for (size_t at = 0; (at = ls.out.find("kv_append.mlir", at)) != std::string::npos; ++at)
    ++entries;
  EXPECT_EQ(entries, 1u) << ls.out;
}

// examples/generate_loop.cpp as a user runs it: 256 tokens through a
// 2-layer decoder, every attention call one pejit kernel of one shape
// class, every new K row rotated by one KV-append kernel. It exits 0 only
// if exactly those two kernels were compiled or loaded.
TEST(Examples, GenerateLoopCompilesOneKernelPerShapeClassForEveryToken) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string command = "PEJIT_CACHE_DIR=" + quote(dir.file("cache")) + " " +
                        quote(GENERATE_LOOP_BINARY) + " >" + quote(dir.file("out")) + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << readText(dir.file("out"));
  std::string out = readText(dir.file("out"));
  EXPECT_TRUE(contains(out, "generated 256 tokens")) << out;
  EXPECT_TRUE(contains(out, "kernels compiled (attention + KV-append): 2 (loaded from disk: 0)"))
      << out;
  EXPECT_TRUE(contains(out, "median decode step")) << out;
}

// examples/hybrid_embedding.cpp: a learned table added to the embeddings
// (kernel 1), then RoPE fused into attention over them (kernel 2); the
// example checks itself against the float64 interpreter and prints both
// kernels' IR.
TEST(Examples, HybridEmbeddingMatchesTheReferenceAndShowsBothKernels) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string command = "PEJIT_CACHE_DIR=" + quote(dir.file("cache")) + " " +
                        quote(HYBRID_EMBEDDING_BINARY) + " --ir >" + quote(dir.file("out")) +
                        " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << readText(dir.file("out"));
  std::string out = readText(dir.file("out"));
  EXPECT_TRUE(contains(out, "2 kernels, max relative error")) << out;
  EXPECT_TRUE(contains(out, "embedding kernel, stage fused")) << out;
  EXPECT_TRUE(contains(out, "pe.learned")) << out;
  EXPECT_TRUE(contains(out, "encodings([#pe.rope")) << out;
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

// A shape class is timed at representative lengths, which the report names
// (it was refused: no one shape to time), or at the lengths given.
TEST(PejitTune, TunesAShapeClassAtRepresentativeOrGivenLengths) {
  Inputs in;
  std::string path = in.dir.file("dynamic.mlir");
  std::ofstream(path) << "func.func @attention(%q: tensor<1x2x?x64xf32>, %k: tensor<1x2x?x64xf32>, "
                         "%v: tensor<1x2x?x64xf32>) -> tensor<1x2x?x64xf32> {\n"
                         "  %o = attn.attention %q, %k, %v : tensor<1x2x?x64xf32>, "
                         "tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x2x?x64xf32>\n"
                         "  return %o : tensor<1x2x?x64xf32>\n}\n";
  Result tune = runWithCache(in.dir, {"tune", path, "--repeats=1", "--candidates=48x48,96x96"});
  EXPECT_EQ(tune.exitCode, 0) << tune.err;
  EXPECT_TRUE(contains(tune.out, "timed at [b=1 sq=512 skv=512] [b=1 sq=2048 skv=2048] [b=1 "
                                 "sq=1 skv=2048]"))
      << tune.out;
  EXPECT_TRUE(contains(tune.out, "best: ")) << tune.out;
  Result given = runWithCache(
      in.dir, {"tune", path, "--repeats=1", "--candidates=48x48,96x96", "--lengths=1x300,70x70"});
  EXPECT_EQ(given.exitCode, 0) << given.err;
  EXPECT_TRUE(contains(given.out, "timed at [b=1 sq=1 skv=300] [b=1 sq=70 skv=70]")) << given.out;
  Result bad = runWithCache(in.dir, {"tune", path, "--lengths=70"});
  EXPECT_EQ(bad.exitCode, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "length '70' is not SQxSKV")) << bad.err;
}

} // namespace
