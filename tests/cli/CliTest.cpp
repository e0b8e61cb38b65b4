// The pejit binary as a user runs it: compile stages, run on .npy files
// (fresh random data each time), --check, malformed inputs, usage errors.
#include "tests/cli/CliTestSupport.h"

#include "pejit/interpreter/ReferenceInterpreter.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <filesystem>

using namespace pejit;
using namespace pejit::clitest;

namespace {

/// A temp dir holding kRopeAlibiSource as attn.mlir and fresh inputs q, k, v
/// (f32) and qpos (int32), kpos (int64) with non-default positions.
struct RopeAlibiFiles {
  TempDir dir;
  ref::Tensor q = randomTensor({1, 4, 48, 64}), k = randomTensor({1, 2, 64, 64}),
              v = randomTensor({1, 2, 64, 64});
  ref::PositionIds qIds = consecutiveIds(1016, 48), kIds = consecutiveIds(1000, 64);
  std::string mlir = dir.file("attn.mlir"), output = dir.file("o.npy");

  RopeAlibiFiles() {
    writeText(mlir, kRopeAlibiSource);
    writeTensor(dir.file("q.npy"), q);
    writeTensor(dir.file("k.npy"), k);
    writeTensor(dir.file("v.npy"), v);
    writeIds(dir.file("qpos.npy"), qIds, npy::DType::I32);
    writeIds(dir.file("kpos.npy"), kIds, npy::DType::I64);
    // Poison the output: a run that writes nothing must not pass.
    ref::Tensor nan({1, 4, 48, 64}, std::vector<double>(1 * 4 * 48 * 64, std::nan("")));
    writeTensor(output, nan);
  }
  std::vector<std::string> runArgs(std::vector<std::string> names) const {
    std::vector<std::string> args = {"run", mlir};
    for (const std::string &name : names)
      args.push_back("--input=@" + dir.file(name));
    return args;
  }
  std::vector<std::string> allInputs() const {
    return runArgs({"q.npy", "k.npy", "v.npy", "qpos.npy", "kpos.npy"});
  }
};

std::vector<double> readOutput(const std::string &path, std::vector<int64_t> expectedShape) {
  npy::Expected<npy::Array> array = npy::readNpy(path);
  EXPECT_TRUE(array) << array.error;
  if (!array)
    return {};
  EXPECT_EQ(array->dtype, npy::DType::F32);
  EXPECT_EQ(array->shape, expectedShape);
  std::vector<float> values = npy::toFloat32(*array);
  return std::vector<double>(values.begin(), values.end());
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(PejitRun, MatchesReferenceOnNpyInputs) {
  SCOPED_TRACE(seedTrace());
  RopeAlibiFiles files;
  ASSERT_TRUE(files.dir.ok());
  std::vector<std::string> args = files.allInputs();
  args.push_back("--output=@" + files.output);
  Result r = runPejit(files.dir, args);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "compile")) << r.err;
  EXPECT_TRUE(contains(r.err, " ms")) << r.err;
  std::vector<double> out = readOutput(files.output, {1, 4, 48, 64});
  ref::Tensor expected = ropeAlibiReference(files.q, files.k, files.v, files.qIds, files.kIds);
  EXPECT_LE(relativeError(out, expected), 1e-4);

  Expected<ref::Tensor> interpreted =
      interpretReference(kRopeAlibiSource, {files.q, files.k, files.v, files.qIds, files.kIds});
  ASSERT_TRUE(interpreted) << interpreted.error();
  EXPECT_LE(relativeError(out, *interpreted), 1e-4);
}

TEST(PejitRun, CheckPassesAndRepeatTimes) {
  SCOPED_TRACE(seedTrace());
  RopeAlibiFiles files;
  std::vector<std::string> args = files.allInputs();
  args.insert(args.end(), {"--check", "--repeat=3", "--threads=2", "--tile=48x36"});
  Result r = runPejit(files.dir, args);
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "max relative error: ")) << r.out;
  EXPECT_TRUE(contains(r.out, "(tolerance 1e-4)")) << r.out;
  EXPECT_TRUE(contains(r.out, "GFLOP/s")) << r.out;
  EXPECT_TRUE(contains(r.out, "median")) << r.out;
}

// A standalone kernel (pe.rope alone) is memory-bound: --repeat reports
// the bytes of output written per second, not an attention's FLOPs.
TEST(PejitRun, RepeatOfAStandaloneKernelReportsBytesWritten) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  writeText(dir.file("rope.mlir"),
            "func.func @rotate(%x: tensor<1x2x16x64xf32>, %pos: tensor<16xi64>) -> "
            "tensor<1x2x16x64xf32> {\n  %r = pe.rope %x, %pos <layout = half, theta = 10000.0> "
            ": tensor<1x2x16x64xf32>, tensor<16xi64>\n  return %r : tensor<1x2x16x64xf32>\n}\n");
  writeTensor(dir.file("x.npy"), randomTensor({1, 2, 16, 64}));
  writeIds(dir.file("pos.npy"), consecutiveIds(0, 16), npy::DType::I64);
  Result r = runPejit(dir, {"run", dir.file("rope.mlir"), "--input=@" + dir.file("x.npy"),
                            "--input=@" + dir.file("pos.npy"), "--repeat=2", "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "GB/s of output written")) << r.out;
  EXPECT_FALSE(contains(r.out, "GFLOP/s")) << r.out;
}

TEST(PejitRun, OmittedPositionIdsTakeTheDefaults) {
  SCOPED_TRACE(seedTrace());
  RopeAlibiFiles files;
  std::vector<std::string> args = files.runArgs({"q.npy", "k.npy", "v.npy"});
  args.insert(args.end(), {"--check", "--output=@" + files.output});
  Result r = runPejit(files.dir, args);
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  ref::Tensor expected =
      ropeAlibiReference(files.q, files.k, files.v, consecutiveIds(16, 48), consecutiveIds(0, 64));
  EXPECT_LE(relativeError(readOutput(files.output, {1, 4, 48, 64}), expected), 1e-4);
}

TEST(PejitRun, HalfPrecisionInputsAreConvertedWithANote) {
  SCOPED_TRACE(seedTrace());
  RopeAlibiFiles files;
  writeTensor(files.dir.file("q16.npy"), files.q, npy::DType::F16);
  writeTensor(files.dir.file("kbf16.npy"), files.k, npy::DType::BF16);
  std::vector<std::string> args =
      files.runArgs({"q16.npy", "kbf16.npy", "v.npy", "qpos.npy", "kpos.npy"});
  args.push_back("--check");
  Result r = runPejit(files.dir, args);
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.err, "q16.npy is float16; the x86 kernel takes float32")) << r.err;
  EXPECT_TRUE(contains(r.err, "kbf16.npy is bfloat16")) << r.err;
}

TEST(PejitRun, ABf16KernelReadsBf16FilesAndWritesItsOutputAsFloat32) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  writeText(dir.file("k.mlir"),
            "func.func @f(%q: tensor<1x2x37x64xbf16>, %k: tensor<1x1x90x64xbf16>, "
            "%v: tensor<1x1x90x64xbf16>) -> tensor<1x2x37x64xbf16> {\n"
            "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = "
            "10000.0>]) : tensor<1x2x37x64xbf16>, tensor<1x1x90x64xbf16>, "
            "tensor<1x1x90x64xbf16> -> tensor<1x2x37x64xbf16>\n"
            "  return %o : tensor<1x2x37x64xbf16>\n}\n");
  writeTensor(dir.file("q.npy"), randomTensor({1, 2, 37, 64}), npy::DType::BF16);
  writeTensor(dir.file("k.npy"), randomTensor({1, 1, 90, 64}), npy::DType::BF16);
  writeTensor(dir.file("v.npy"), randomTensor({1, 1, 90, 64}), npy::DType::BF16);
  Result r = runPejit(dir, {"run", dir.file("k.mlir"), "--input=@" + dir.file("q.npy"),
                            "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"),
                            "--output=@" + dir.file("o.npy"), "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_FALSE(contains(r.err, "note:")) << r.err; // bf16 files for a bf16 kernel
  size_t at = r.out.find("max relative error: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_LE(std::atof(r.out.c_str() + at + 20), 1e-2) << r.out;
  npy::Expected<npy::Array> out = npy::readNpy(dir.file("o.npy"));
  ASSERT_TRUE(out) << out.error;
  EXPECT_EQ(out->dtype, npy::DType::F32);
  for (float x : npy::toFloat32(*out))
    ASSERT_TRUE(std::isfinite(x));
}

/// Runs with k.npy replaced by `bytes` (or absent) and expects exit code 1
/// and a message naming k.npy and containing `phrase`.
void expectBadKey(RopeAlibiFiles &files, const std::string &phrase) {
  Result r = runPejit(files.dir, files.allInputs());
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_TRUE(contains(r.err, files.dir.file("k.npy"))) << r.err;
  EXPECT_TRUE(contains(r.err, phrase)) << r.err;
}

TEST(PejitRun, MalformedNpyIsReportedWithTheFileName) {
  RopeAlibiFiles files;
  std::string k = files.dir.file("k.npy");
  std::vector<uint8_t> good = npy::serializeNpy(
      npy::fromFloat32(std::vector<float>(2 * 64 * 64), {1, 2, 64, 64}, npy::DType::F32));
  std::string bytes(good.begin(), good.end());

  writeText(k, bytes.substr(0, bytes.size() - 100)); // truncated data
  expectBadKey(files, "needs 32768 bytes of data but the file has 32668");
  writeText(k, bytes.substr(0, 20)); // truncated header
  expectBadKey(files, "truncated header");
  std::string f8 = bytes;
  f8.replace(f8.find("<f4"), 3, "<f8");
  writeText(k, f8); // float64
  expectBadKey(files, "'<f8' (float64) is not supported");
  writeText(k, "PK\x03\x04 not an npy file");
  expectBadKey(files, "bad magic");
  writeTensor(k, randomTensor({1, 2, 64, 32}));
  expectBadKey(files, "shape (1, 2, 64, 32) does not match argument 1 (key) of @attn: "
                      "expected (1, 2, 64, 64)");
  ASSERT_EQ(npy::writeNpy(k, npy::fromInt64(std::vector<int64_t>(2 * 64 * 64), {1, 2, 64, 64},
                                            npy::DType::I32)),
            "");
  expectBadKey(files, "dtype int32 does not match argument 1 (key) of @attn: expected float32");
  std::filesystem::remove(k);
  expectBadKey(files, "cannot open");

  writeTensor(files.dir.file("kpos.npy"), randomTensor({64}));
  Result r =
      runPejit(files.dir, files.runArgs({"q.npy", "v.npy", "v.npy", "qpos.npy", "kpos.npy"}));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(contains(r.err, "kpos.npy: dtype float32 does not match argument 4 "
                              "(key_positions) of @attn: expected int32 or int64"))
      << r.err;
}

TEST(PejitRun, WrongInputCountListsTheArguments) {
  RopeAlibiFiles files;
  for (std::vector<std::string> names :
       {std::vector<std::string>{"q.npy", "k.npy"},
        {"q.npy", "k.npy", "v.npy", "qpos.npy", "kpos.npy", "kpos.npy"}}) {
    Result r = runPejit(files.dir, files.runArgs(names));
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "@attn takes 3 to 5 inputs")) << r.err;
    EXPECT_TRUE(contains(r.err, "got " + std::to_string(names.size()))) << r.err;
    EXPECT_TRUE(contains(r.err, "1 (key): tensor<1x2x64x64xf32>")) << r.err;
    EXPECT_TRUE(contains(r.err, "3 (query_positions): tensor<48xi32>")) << r.err;
  }
}

TEST(PejitRun, UsageErrorsExitWithTwo) {
  RopeAlibiFiles files;
  for (std::vector<std::string> args : {std::vector<std::string>{"run", files.mlir, "--bogus"},
                                        {"run", files.mlir, "--tile=abc"},
                                        {"run", files.mlir, "--repeat=0"},
                                        {"run", "--check"},
                                        {"frobnicate"},
                                        {}}) {
    Result r = runPejit(files.dir, args);
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "usage: pejit")) << r.err;
    // The mistake and a pointer to --help, not the whole usage.
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  }
  Result typo = runPejit(files.dir, {"run", files.mlir, "--chek"});
  EXPECT_TRUE(contains(typo.err, "unknown flag '--chek'; did you mean '--check'?")) << typo.err;
}

// One position-id argument that feeds both pe.rope ops (the LLaMA example's
// form) must rotate Q and K by it (the kernel binds it as "positions", both
// roles).
TEST(PejitRun, SharedPositionIdsRotateQueriesAndKeys) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  std::string mlir = dir.file("shared.mlir");
  writeText(mlir, R"mlir(
func.func @shared(%q: tensor<1x4x64x64xf32>, %k: tensor<1x2x64x64xf32>,
                  %v: tensor<1x2x64x64xf32>, %pos: tensor<64xi32>) -> tensor<1x4x64x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x64x64xf32>, tensor<64xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x2x64x64xf32>, tensor<64xi32>
  %o = attn.attention %qr, %kr, %v causal
      : tensor<1x4x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>
      -> tensor<1x4x64x64xf32>
  return %o : tensor<1x4x64x64xf32>
})mlir");
  writeTensor(dir.file("q.npy"), randomTensor({1, 4, 64, 64}));
  writeTensor(dir.file("k.npy"), randomTensor({1, 2, 64, 64}));
  writeTensor(dir.file("v.npy"), randomTensor({1, 2, 64, 64}));
  std::vector<int64_t> positions(64);
  for (int64_t i = 0; i < 64; ++i)
    positions[i] = 3 * i + 7;
  writeIds(dir.file("pos.npy"), ref::PositionIds::shared(positions), npy::DType::I32);
  Result r = runPejit(dir, {"run", mlir, "--input=@" + dir.file("q.npy"),
                            "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"),
                            "--input=@" + dir.file("pos.npy"), "--check"});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

TEST(PejitCompile, EmitsEachStage) {
  TempDir dir;
  std::string mlir = dir.file("attn.mlir");
  writeText(mlir, kRopeAlibiSource);
  Result tiled = runPejit(dir, {"compile", mlir, "--emit=tiled", "--tile=48x36"});
  ASSERT_EQ(tiled.exitCode, 0) << tiled.err;
  EXPECT_TRUE(contains(tiled.out, "func.func @pejit_item")) << tiled.out;

  Result fused = runPejit(dir, {"compile", mlir});
  ASSERT_EQ(fused.exitCode, 0) << fused.err;
  EXPECT_TRUE(contains(fused.out, "encodings(")) << fused.out;
  EXPECT_FALSE(contains(fused.out, "pe.rope ")) << fused.out;

  Result all = runPejit(dir, {"compile", mlir, "--emit=all"});
  ASSERT_EQ(all.exitCode, 0) << all.err;
  for (const char *stage : {"source", "fused", "tiled", "llvm", "llvm-ir", "asm"})
    EXPECT_TRUE(contains(all.out, std::string("// ----- stage: ") + stage + " -----")) << stage;
  EXPECT_TRUE(contains(all.out, "define ")) << "llvm-ir holds LLVM IR functions";
}

TEST(PejitCompile, ErrorsAndUsage) {
  TempDir dir;
  std::string mlir = dir.file("attn.mlir");
  writeText(mlir, kRopeAlibiSource);
  Result stage = runPejit(dir, {"compile", mlir, "--emit=bogus"});
  EXPECT_EQ(stage.exitCode, 2);
  EXPECT_TRUE(contains(stage.err, "unknown stage 'bogus'")) << stage.err;

  std::string broken = dir.file("broken.mlir");
  writeText(broken, "func.func @f() { attn.attention }\n");
  Result error = runPejit(dir, {"compile", broken});
  EXPECT_EQ(error.exitCode, 1);
  EXPECT_TRUE(contains(error.err, broken)) << error.err;

  Result missing = runPejit(dir, {"compile", dir.file("missing.mlir")});
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_TRUE(contains(missing.err, "missing.mlir: cannot open")) << missing.err;

  Result badTile = runPejit(dir, {"compile", mlir, "--tile=50x36"});
  EXPECT_EQ(badTile.exitCode, 1);
  EXPECT_TRUE(contains(badTile.err, "multiple of 48")) << badTile.err;
}

TEST(PejitHelp, ListsTheCommands) {
  TempDir dir;
  for (const char *flag : {"--help", "help"}) {
    Result r = runPejit(dir, {flag});
    EXPECT_EQ(r.exitCode, 0);
    EXPECT_TRUE(contains(r.out, "usage: pejit")) << r.out;
    EXPECT_TRUE(contains(r.out, "  compile FILE.mlir")) << r.out;
    EXPECT_TRUE(contains(r.out, "  run FILE.mlir")) << r.out;
  }
}

// Every subcommand answers --help (and -h, anywhere on the line) with its own
// usage on stdout and exit 0, even where its other arguments are wrong.
TEST(PejitHelp, EveryCommandAnswersHelp) {
  TempDir dir;
  for (const char *command : {"compile", "run", "bench", "tune", "cache"}) {
    for (std::vector<std::string> args :
         {std::vector<std::string>{command, "--help"}, {command, "x.mlir", "--bogus", "-h"}}) {
      Result r = runPejit(dir, args);
      EXPECT_EQ(r.exitCode, 0) << command << ": " << r.err;
      EXPECT_TRUE(contains(r.out, std::string("usage: pejit ") + command)) << r.out;
      EXPECT_FALSE(contains(r.out, "commands:")) << command << " printed the whole usage";
    }
  }
  // compile's stage list is the stage tables' (x86 and nvidia).
  Result compile = runPejit(dir, {"compile", "--help"});
  EXPECT_TRUE(contains(compile.out, "source, fused, tiled, llvm, llvm-ir, asm")) << compile.out;
  EXPECT_TRUE(contains(compile.out, "source, fused, tiled, unrolled, ptx")) << compile.out;
}

} // namespace

// `pejit bench` on its cheapest case: it measures something real (positive
// times, a peak, a compile) and rejects unknown flags.
TEST(PejitBench, DecodeCaseReportsMeasurements) {
  TempDir dir;
  Result r = runPejit(dir, {"bench", "--json", "--cases=decode-4096", "--repeats=1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto field = [&](const std::string &name) {
    size_t at = r.out.find("\"" + name + "\": ");
    EXPECT_NE(at, std::string::npos) << name << " missing in " << r.out;
    return at == std::string::npos ? -1.0 : std::atof(r.out.c_str() + at + name.size() + 4);
  };
  EXPECT_GT(field("peak_gflops"), 1.0);
  EXPECT_GT(field("fused_ms"), 0.0);
  EXPECT_GT(field("unfused_ms"), 0.0);
  EXPECT_GT(field("compile_ms"), 1.0);
  EXPECT_GT(field("cache_hit_us"), 0.0);
  Result bad = runPejit(dir, {"bench", "--bogus"});
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_TRUE(contains(bad.err, "unknown argument '--bogus'")) << bad.err;
}

namespace {

// A device or a huge file is an error naming it, never an allocation
// without end; a run without --output says that the result is not kept.
TEST(PejitRun, BoundedSourceAndAWordWithoutOutput) {
  RopeAlibiFiles files;
  Result zero = runPejit(files.dir, {"run", "/dev/zero", "--input=@" + files.dir.file("q.npy")});
  EXPECT_EQ(zero.exitCode, 1) << zero.err;
  EXPECT_TRUE(contains(zero.err, "/dev/zero: the source is larger than 64 MiB")) << zero.err;
  Result run = runPejit(files.dir, files.allInputs());
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(contains(run.err, "no --output=@FILE.npy given")) << run.err;
}

// A 16-bit kernel's f32 encoding operand (a T5 table) goes in as f32, not
// narrowed to the kernel's type: the run passes --check.
TEST(PejitRun, SixteenBitKernelKeepsItsF32TableF32) {
  TempDir dir;
  const char *source =
      "func.func @f(%q: tensor<1x4x40x64xbf16>, %k: tensor<1x4x40x64xbf16>, "
      "%v: tensor<1x4x40x64xbf16>, %t: tensor<32x4xf32>) -> tensor<1x4x40x64xbf16> {\n"
      "  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x4xf32> -> "
      "tensor<1x4x40x40xf32>\n"
      "  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x40x40xf32>) scale(1.0) : "
      "tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16> -> "
      "tensor<1x4x40x64xbf16>\n  return %o : tensor<1x4x40x64xbf16>\n}\n";
  writeText(dir.file("t5.mlir"), source);
  for (const char *name : {"q", "k", "v"})
    writeTensor(dir.file(std::string(name) + ".npy"), randomTensor({1, 4, 40, 64}));
  writeTensor(dir.file("t.npy"), randomTensor({32, 4}));
  Result r = runPejit(dir, {"run", dir.file("t5.mlir"), "--input=@" + dir.file("q.npy"),
                            "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"),
                            "--input=@" + dir.file("t.npy"), "--check"});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "max relative error")) << r.out;
}

} // namespace

namespace {

// A verifier error names the rule in the user's terms: no generic-form
// dump of the op ("see current operation") after it.
TEST(PejitCompile, VerifierErrorsHaveNoGenericOpDump) {
  TempDir dir;
  writeText(
      dir.file("bad.mlir"),
      "func.func @f(%q: tensor<1x3x8x64xf32>, %k: tensor<1x2x8x64xf32>, "
      "%v: tensor<1x2x8x64xf32>) -> tensor<1x3x8x64xf32> {\n"
      "  %o = attn.attention %q, %k, %v : tensor<1x3x8x64xf32>, tensor<1x2x8x64xf32>, "
      "tensor<1x2x8x64xf32> -> tensor<1x3x8x64xf32>\n  return %o : tensor<1x3x8x64xf32>\n}\n");
  Result r = runPejit(dir, {"compile", dir.file("bad.mlir")});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "multiple")) << r.err;
  EXPECT_FALSE(contains(r.err, "see current operation")) << r.err;
}

} // namespace

namespace {

// A mistyped attribute parameter or keyword gets the dialects' nearest
// name; an unrelated word gets none.
TEST(PejitCompile, MistypedNamesGetDidYouMean) {
  TempDir dir;
  auto source = [](const std::string &rope, const std::string &mask) {
    return "func.func @f(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: "
           "tensor<1x2x8x64xf32>, %p: tensor<8xi64>) -> tensor<1x2x8x64xf32> {\n"
           "  %qr = pe.rope %q, %p <layout = half, " +
           rope +
           " = 10000.0> : tensor<1x2x8x64xf32>, tensor<8xi64>\n"
           "  %o = attn.attention %qr, %k, %v " +
           mask +
           " : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> "
           "tensor<1x2x8x64xf32>\n  return %o : tensor<1x2x8x64xf32>\n}\n";
  };
  writeText(dir.file("a.mlir"), source("thetta", "causal"));
  Result a = runPejit(dir, {"compile", dir.file("a.mlir")});
  EXPECT_EQ(a.exitCode, 1);
  EXPECT_TRUE(contains(a.err, "unknown struct parameter name: thetta (did you mean 'theta'"))
      << a.err;
  writeText(dir.file("b.mlir"), source("theta", "casual"));
  Result b = runPejit(dir, {"compile", dir.file("b.mlir")});
  EXPECT_TRUE(contains(b.err, "(did you mean 'causal' for 'casual'?)")) << b.err;
  writeText(dir.file("c.mlir"), source("theta", "zzzzzz"));
  Result c = runPejit(dir, {"compile", dir.file("c.mlir")});
  EXPECT_EQ(c.exitCode, 1);
  EXPECT_FALSE(contains(c.err, "did you mean")) << c.err;
}

} // namespace

namespace {

// --check of a long linear attention: the float64 reference grows its sums
// key by key past 2^22 (query, key) pairs (it took minutes, O(n^2)).
TEST(PejitRun, CheckOfALongLinearAttention) {
  TempDir dir;
  const std::string x = "tensor<1x2x?x64xf32>";
  writeText(dir.file("linear.mlir"),
            "func.func @f(%q: " + x + ", %k: " + x + ", %v: " + x + ") -> " + x +
                " {\n  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal "
                "encodings([#pe.rope<layout = half, theta = 10000.0>]) "
                "rope_placement(rope_on_numerator) : " +
                x + ", " + x + ", " + x + " -> " + x + "\n  return %o : " + x + "\n}\n");
  for (const char *name : {"q", "k", "v"})
    writeTensor(dir.file(std::string(name) + ".npy"), randomTensor({1, 2, 4096, 64}));
  Result r =
      runPejit(dir, {"run", dir.file("linear.mlir"), "--input=@" + dir.file("q.npy"),
                     "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"), "--check"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "max relative error")) << r.out;
}

} // namespace
