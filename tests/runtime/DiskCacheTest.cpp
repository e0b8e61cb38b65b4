// The disk cache: a second Runtime (as a second process would) loads kernels
// without compiling and gets identical output; damaged entries are rebuilt
// with a warning; a crashed writer leaves nothing that loads; concurrent
// writers leave one whole entry; eviction keeps the size limit.
#include "pejit/runtime/cache/DiskCache.h"
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/runtime/Pejit.h"

#include "gtest/gtest.h"

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace pejit;
namespace fs = std::filesystem;

namespace {

// Every other runtime test keeps kernels in memory only (its compile counts
// must not depend on what an earlier test or run left on disk); the tests
// here turn the disk cache on for their own directory.
const bool kMemoryOnlyByDefault = [] {
  setenv("PEJIT_DISABLE_CACHE", "1", 1);
  return true;
}();

const Shape kShape{1, 2, 1, 37, 53, 64, 64};

Spec ropeSpec() {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  return Spec::fromBuilder(spec, kShape);
}

class DiskCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    unsetenv("PEJIT_DISABLE_CACHE");
    dir = fs::temp_directory_path() /
          ("pejit-cache-test-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    std::mt19937 engine(std::random_device{}());
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::vector<float> *t : {&q, &k, &v}) {
      t->resize(t == &q ? 2 * 37 * 64 : 53 * 64);
      for (float &x : *t)
        x = dist(engine);
    }
  }
  void TearDown() override {
    setenv("PEJIT_DISABLE_CACHE", "1", 1);
    fs::remove_all(dir);
  }
  RuntimeOptions options() const {
    RuntimeOptions o;
    o.cacheDir = dir.string();
    return o;
  }
  /// Runs the kernel on this test's inputs into a NaN-poisoned output.
  std::vector<float> run(const X86Kernel &kernel) const {
    std::vector<float> out(2 * 37 * 64, std::numeric_limits<float>::quiet_NaN());
    Status status = kernel.run({{const_cast<float *>(q.data()), DType::F32, {1, 2, 37, 64}, {}},
                                {const_cast<float *>(k.data()), DType::F32, {1, 1, 53, 64}, {}},
                                {const_cast<float *>(v.data()), DType::F32, {1, 1, 53, 64}, {}}},
                               {out.data(), DType::F32, {1, 2, 37, 64}, {}});
    EXPECT_TRUE(status) << status.message();
    return out;
  }
  fs::path entry() const {
    for (const auto &item : fs::directory_iterator(dir))
      if (item.is_directory() && item.path().filename().string().size() == 16)
        return item.path();
    return {};
  }
  fs::path dir;
  std::vector<float> q, k, v;
};

TEST_F(DiskCacheTest, SecondRuntimeLoadsFromDiskWithIdenticalOutput) {
  std::vector<float> fresh, loaded;
  {
    Runtime first(options());
    Expected<X86Kernel> kernel = first.getX86(ropeSpec());
    ASSERT_TRUE(kernel) << kernel.error();
    EXPECT_FALSE(kernel->loadedFromDisk());
    EXPECT_EQ(first.stats().compiles, 1);
    fresh = run(*kernel);
  }
  Runtime second(options());
  Expected<X86Kernel> kernel = second.getX86(ropeSpec());
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_TRUE(kernel->loadedFromDisk());
  EXPECT_EQ(second.stats().compiles, 0);
  EXPECT_EQ(second.stats().diskHits, 1);
  loaded = run(*kernel);
  ASSERT_EQ(fresh.size(), loaded.size());
  for (size_t i = 0; i < fresh.size(); ++i)
    ASSERT_EQ(fresh[i], loaded[i]) << "element " << i;
  // Every stage's IR comes back too.
  for (const std::string &stage : {"source", "fused", "tiled", "llvm", "asm"}) {
    Expected<std::string> text = kernel->ir(stage);
    ASSERT_TRUE(text) << stage << ": " << text.error();
    EXPECT_FALSE(text->empty()) << stage;
  }
  DiskCache::Stats stats = DiskCache(CacheSettings{true, dir.string()}).stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
}

TEST_F(DiskCacheTest, DamagedEntriesAreRebuiltWithAWarning) {
  std::vector<float> reference;
  {
    Runtime first(options());
    Expected<X86Kernel> kernel = first.getX86(ropeSpec());
    ASSERT_TRUE(kernel) << kernel.error();
    reference = run(*kernel);
  }
  struct Damage {
    const char *problem;
    std::function<void(const fs::path &)> apply;
  };
  std::vector<Damage> damages = {
      {"kernel.o is truncated",
       [](const fs::path &e) {
         fs::resize_file(e / "kernel.o", fs::file_size(e / "kernel.o") / 2);
       }},
      {"kernel.o checksum mismatch",
       [](const fs::path &e) {
         std::fstream file(e / "kernel.o", std::ios::in | std::ios::out | std::ios::binary);
         file.seekp(100);
         char byte = 0;
         file.seekg(100);
         file.read(&byte, 1);
         file.seekp(100);
         byte ^= 0x5a;
         file.write(&byte, 1);
       }},
      {"meta is not a pejit cache entry",
       [](const fs::path &e) { std::ofstream(e / "meta", std::ios::trunc) << "garbage\x01\x02"; }},
      {"kernel.o is missing", [](const fs::path &e) { fs::remove(e / "kernel.o"); }},
      {"stages checksum mismatch",
       [](const fs::path &e) {
         std::fstream file(e / "stages", std::ios::in | std::ios::out | std::ios::binary);
         file.seekp(10);
         file.write("#", 1);
       }},
  };
  // With two or more cores a kernel is compiled in parts (ParallelCodegen.h),
  // stored as kernel.o, kernel.1.o, ...: a later part is checked as well.
  if (std::thread::hardware_concurrency() >= 2) {
    damages.push_back({"kernel.1.o is missing", [](const fs::path &e) {
                         ASSERT_TRUE(fs::exists(e / "kernel.1.o"));
                         fs::remove(e / "kernel.1.o");
                       }});
    damages.push_back({"kernel.1.o is truncated", [](const fs::path &e) {
                         fs::resize_file(e / "kernel.1.o", fs::file_size(e / "kernel.1.o") - 1);
                       }});
  }
  // A meta naming an ISA family this host lacks, as a cache directory
  // shared with another kind of host could hold: refused before its code is
  // mapped (docs/isa.md), whatever the key says.
  auto forgeIsa = [](const std::string &isa) {
    return [isa](const fs::path &e) {
      std::ifstream in(e / "meta");
      std::string line, text;
      bool found = false;
      while (std::getline(in, line)) {
        if (line.rfind("checksum ", 0) == 0)
          continue; // written again below, as a writer would
        found = found || line.rfind("isa ", 0) == 0;
        text += (line.rfind("isa ", 0) == 0 ? "isa " + isa + " 16" : line) + "\n";
      }
      in.close();
      ASSERT_TRUE(found) << "the meta has no isa line";
      std::ofstream(e / "meta", std::ios::trunc) << text << "checksum " << fnv1aHex(text) << "\n";
    };
  };
  damages.push_back({"names no x86 ISA family", forgeIsa("sse9")});
  std::optional<X86Isa> foreign;
  for (X86Isa isa : allX86Isas())
    if (!foreign && !x86IsaMissingFlag(isa, hostHasCpuFeature).empty())
      foreign = isa;
  if (foreign)
    damages.push_back({"which this host", forgeIsa(x86IsaName(*foreign))});
  else
    std::printf("note: this host has every x86 ISA family's flags; the foreign-family meta "
                "is checked on hosts that lack one\n");
  for (const Damage &damage : damages) {
    SCOPED_TRACE(damage.problem);
    fs::path stored = entry();
    ASSERT_FALSE(stored.empty());
    damage.apply(stored);
    ::testing::internal::CaptureStderr();
    Runtime again(options());
    Expected<X86Kernel> kernel = again.getX86(ropeSpec());
    std::string warnings = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(kernel) << kernel.error();
    EXPECT_FALSE(kernel->loadedFromDisk());
    EXPECT_EQ(again.stats().compiles, 1);
    EXPECT_NE(warnings.find(damage.problem), std::string::npos) << warnings;
    std::vector<float> out = run(*kernel);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], reference[i]) << "element " << i;
    // ... and the rebuilt entry is whole again.
    Runtime after(options());
    Expected<X86Kernel> reloaded = after.getX86(ropeSpec());
    ASSERT_TRUE(reloaded);
    EXPECT_TRUE(reloaded->loadedFromDisk());
  }
}

TEST_F(DiskCacheTest, DumpIrWritesEveryStageOfEachCompile) {
  fs::path dump = dir / "dump";
  setenv("PEJIT_DUMP_IR", dump.c_str(), 1);
  Runtime runtime(options());
  unsetenv("PEJIT_DUMP_IR");
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec());
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<fs::path> kernels;
  for (const auto &item : fs::directory_iterator(dump))
    kernels.push_back(item.path());
  ASSERT_EQ(kernels.size(), 1u);
  for (const std::string &stage : {"source", "fused", "tiled", "llvm"}) {
    std::ifstream file(kernels[0] / (stage + ".mlir"));
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, *kernel->ir(stage)) << stage;
  }
}

TEST_F(DiskCacheTest, UnwritableDirectoryWarnsAndKeepsWorking) {
  RuntimeOptions o;
  o.cacheDir = "/proc/self/pejit-cache-cannot-exist";
  ::testing::internal::CaptureStderr();
  Runtime runtime(o);
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec());
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_NE(warnings.find("pejit-cache-cannot-exist"), std::string::npos) << warnings;
  std::vector<float> out = run(*kernel);
  for (float x : out)
    ASSERT_TRUE(std::isfinite(x));
}

TEST_F(DiskCacheTest, FourRuntimesOnOneKeyLeaveOneWholeEntry) {
  std::vector<std::vector<float>> outputs(4);
  std::vector<int64_t> compiles(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Runtime runtime(options());
      Expected<X86Kernel> kernel = runtime.getX86(ropeSpec());
      ASSERT_TRUE(kernel) << kernel.error();
      compiles[t] = runtime.stats().compiles;
      outputs[t] = run(*kernel);
    });
  for (std::thread &thread : threads)
    thread.join();
  // The key's lock file makes the others wait and load the first's entry.
  EXPECT_EQ(compiles[0] + compiles[1] + compiles[2] + compiles[3], 1);
  for (int t = 1; t < 4; ++t)
    EXPECT_EQ(outputs[t], outputs[0]);
  DiskCache cache(CacheSettings{true, dir.string()});
  std::vector<DiskCache::EntryInfo> entries = cache.list(/*verify=*/true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].problem, "");
}

KernelArtifact bigArtifact(int64_t objectBytes, char fill) {
  KernelArtifact artifact;
  artifact.shape = kShape;
  artifact.signature =
      *KernelSignature::parse("query:f32:1x1x1x8 key:f32:1x1x1x8 value:f32:1x1x1x8");
  artifact.items = 4;
  artifact.stages["source"] = "module {}";
  artifact.objects = {std::string(static_cast<size_t>(objectBytes), fill)};
  return artifact;
}

TEST_F(DiskCacheTest, WriterKilledMidWriteLeavesNothingThatLoads) {
  fs::create_directories(dir);
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      DiskCache cache(CacheSettings{true, dir.string()});
      for (int i = 0;; ++i)
        cache.store("key-" + std::to_string(i % 3), "killed writer", bigArtifact(64 << 20, 'x'));
    }
    ::usleep(150000 + attempt * 70000);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    DiskCache cache(CacheSettings{true, dir.string()});
    for (int i = 0; i < 3; ++i) {
      std::optional<KernelArtifact> loaded = cache.load("key-" + std::to_string(i));
      if (loaded) { // a whole entry, never a partial one
        EXPECT_EQ(loaded->objects.at(0).size(), size_t{64} << 20);
        EXPECT_EQ(loaded->objects.at(0).find_first_not_of('x'), std::string::npos);
      }
    }
  }
}

TEST_F(DiskCacheTest, EvictionKeepsTheSizeLimit) {
  CacheSettings settings{true, dir.string()};
  settings.maxBytes = 2500000; // room for two 1 MB entries
  DiskCache cache(settings);
  for (int i = 0; i < 5; ++i) {
    cache.store("key-" + std::to_string(i), "entry", bigArtifact(1 << 20, 'a' + i));
    ::usleep(1100000 * (i < 4)); // distinct mtimes (1 s resolution on some file systems)
  }
  DiskCache::Stats stats = cache.stats();
  EXPECT_LE(stats.bytes, settings.maxBytes);
  EXPECT_EQ(stats.entries, 2);
  EXPECT_TRUE(cache.load("key-4")); // the newest stay
  EXPECT_TRUE(cache.load("key-3"));
  EXPECT_FALSE(cache.load("key-0"));
}

TEST_F(DiskCacheTest, TunerPicksTheFastestPersistsItAndSurvivesAFailingCandidate) {
  TuneOptions tuning;
  tuning.progress = false;
  // 50x7 is not a valid tile (query tiles are multiples of 48): it must
  // fail to compile, be reported, and not stop the others.
  tuning.candidates = {{144, 96}, {96, 48}, {50, 7}, {48, 72}};
  // Speeds under the test's control: 96x48 is the fast one.
  tuning.measure = [](const X86Kernel &kernel) {
    return kernel.tiles().queryTile == 96 && kernel.tiles().keyTile == 48 ? 1.0 : 5.0;
  };
  {
    Runtime runtime(options());
    Expected<TuneReport> report = runtime.tune(ropeSpec(), tuning);
    ASSERT_TRUE(report) << report.error();
    EXPECT_EQ(report->best.queryTile, 96);
    EXPECT_EQ(report->best.keyTile, 48);
    ASSERT_EQ(report->candidates.size(), 4u);
    EXPECT_FALSE(report->candidates[2].error.empty());
    EXPECT_TRUE(std::isinf(report->candidates[2].medianMs));
    EXPECT_NE(report->table().find("failed"), std::string::npos) << report->table();
  }
  // A later Runtime (another process) uses the stored choice by itself,
  // and the tuned kernel is a correct one (same output as the default's).
  Runtime later(options());
  Expected<X86Kernel> tuned = later.getX86(ropeSpec());
  ASSERT_TRUE(tuned) << tuned.error();
  EXPECT_EQ(tuned->tiles().queryTile, 96);
  EXPECT_EQ(tuned->tiles().keyTile, 48);
  Expected<X86Kernel> standard = later.getX86(ropeSpec(), X86TileConfig{});
  ASSERT_TRUE(standard);
  std::vector<float> a = run(*tuned), b = run(*standard);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  EXPECT_LE(worst, 1e-5 * scale); // different tiles: f32 rounding only
}

TEST_F(DiskCacheTest, EveryFailedCandidateIsAnErrorValue) {
  TuneOptions tuning;
  tuning.progress = false;
  tuning.candidates = {{50, 7}};
  Runtime runtime(options());
  Expected<TuneReport> report = runtime.tune(ropeSpec(), tuning);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("every candidate failed"), std::string::npos) << report.error();
}

} // namespace
