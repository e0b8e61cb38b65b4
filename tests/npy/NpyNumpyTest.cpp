//===- NpyNumpyTest.cpp - interoperability with real NumPy -----------------===//
//
// Runs python3 with numpy when it is importable (skips otherwise): NumPy
// saves files that readNpy must read, loads files that writeNpy wrote, and
// is the oracle for float32 -> float16 rounding.
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/npy/Npy.h"
#include "tests/npy/NpyTestSupport.h"

#include <cmath>
#include <sys/wait.h>

using namespace pejit::npy;
using namespace pejit::npytest;

namespace {

bool haveNumpy() {
  static const bool have = std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return have;
}

#define REQUIRE_NUMPY()                                                                            \
  do {                                                                                             \
    if (!haveNumpy())                                                                              \
      GTEST_SKIP() << "python3 cannot import numpy; install it (pip install "                      \
                      "numpy) to test against real NumPy files";                                   \
  } while (false)

/// Runs a Python script (numpy imported as np); returns its exit status.
int runPython(const TempDir &dir, const std::string &body) {
  std::string script = "import sys\nimport numpy as np\n" + body;
  std::string path = dir.file("script.py");
  writeFileBytes(path, script.data(), script.size());
  int status = std::system(("python3 '" + path + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Kind {
  DType dtype;
  const char *numpyDescr;
};
const Kind kKinds[] = {{DType::F32, "<f4"},
                       {DType::F16, "<f2"},
                       {DType::BF16, "<u2"},
                       {DType::I32, "<i4"},
                       {DType::I64, "<i8"}};
const std::vector<std::vector<int64_t>> kShapes = {{}, {0}, {7}, {2, 3, 5}, {1, 2, 3, 4}};

std::string pyShape(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (int64_t d : shape)
    s += std::to_string(d) + ",";
  return s + ")";
}

} // namespace

TEST(NpyNumpy, ReadsFilesSavedByNumpy) {
  REQUIRE_NUMPY();
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  std::string script;
  std::vector<std::vector<uint8_t>> raw;
  for (const Kind &k : kKinds)
    for (const auto &shape : kShapes) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      std::string i = std::to_string(raw.size());
      raw.push_back(rng.bytes(size_t(n) * elementSize(k.dtype)));
      writeFileBytes(dir.file(i + ".bin"), raw.back().data(), raw.back().size());
      script += "np.save('" + dir.file(i + ".npy") + "', np.fromfile('" + dir.file(i + ".bin") +
                "', dtype='" + k.numpyDescr + "').reshape(" + pyShape(shape) + "))\n";
    }
  ASSERT_EQ(runPython(dir, script), 0);
  size_t i = 0;
  for (const Kind &k : kKinds)
    for (const auto &shape : kShapes) {
      std::string path = dir.file(std::to_string(i) + ".npy");
      SCOPED_TRACE(path);
      Expected<Array> r = readNpy(path);
      ASSERT_TRUE(r) << r.error;
      EXPECT_EQ(r->dtype, k.dtype);
      EXPECT_EQ(r->shape, shape);
      EXPECT_EQ(r->bytes, raw[i]);
      ++i;
    }
}

TEST(NpyNumpy, NumpyLoadsFilesWrittenByPejit) {
  REQUIRE_NUMPY();
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  std::string script = "bad = 0\n";
  size_t i = 0;
  for (const Kind &k : kKinds)
    for (const auto &shape : kShapes) {
      Array a{k.dtype, shape, {}};
      a.bytes = rng.bytes(size_t(a.numel()) * elementSize(k.dtype));
      std::string name = dir.file(std::to_string(i++));
      ASSERT_EQ(writeNpy(name + ".npy", a), "");
      writeFileBytes(name + ".bin", a.bytes.data(), a.bytes.size());
      script += "a = np.load('" + name +
                ".npy')\n"
                "if a.dtype.str != '" +
                k.numpyDescr + "' or a.shape != " + pyShape(shape) + " or a.tobytes() != open('" +
                name +
                ".bin', 'rb').read():\n"
                "    print('mismatch in', '" +
                name + "', a.dtype.str, a.shape); bad = 1\n";
    }
  EXPECT_EQ(runPython(dir, script + "sys.exit(bad)\n"), 0);
}

TEST(NpyNumpy, RejectsNumpyFilesWeDoNotSupport) {
  REQUIRE_NUMPY();
  TempDir dir;
  ASSERT_EQ(runPython(dir, "a = np.arange(6, dtype='<f4').reshape(2, 3)\n"
                           "np.save('" +
                               dir.file("fortran.npy") +
                               "', np.asfortranarray(a))\n"
                               "np.save('" +
                               dir.file("f64.npy") +
                               "', a.astype(np.float64))\n"
                               "np.save('" +
                               dir.file("big.npy") + "', a.astype('>f4'))\n"),
            0);
  const std::pair<const char *, const char *> cases[] = {
      {"fortran.npy", "fortran_order=True is not supported (save with np.ascontiguousarray)"},
      {"f64.npy", "'<f8' (float64) is not supported; use float32, float16, "
                  "bfloat16 (as uint16), int32 or int64"},
      {"big.npy", "big-endian '>f4' is not supported"}};
  for (auto [name, phrase] : cases) {
    Expected<Array> r = readNpy(dir.file(name));
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error.rfind(dir.file(name) + ": ", 0), 0u) << r.error;
    EXPECT_NE(r.error.find(phrase), std::string::npos) << r.error;
  }
}

TEST(NpyNumpy, Float16RoundingMatchesNumpy) {
  REQUIRE_NUMPY();
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  std::vector<float> values;
  for (int i = 0; i < 20000; ++i) {
    float x = std::ldexp(rng.uniform(1.0f, 2.0f), int(rng.integer(-27, 16)));
    values.push_back(rng.bits() & 1 ? -x : x);
  }
  // Exact ties: every f16 value plus half an f16 ulp.
  for (int i = 0; i < 2000; ++i) {
    int e = int(rng.integer(-14, 15));
    float m = float(rng.integer(1024, 2047));
    values.push_back(std::ldexp(m + 0.5f, e - 10));
  }
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(std::ldexp(1.0f, -25));
  int64_t n = int64_t(values.size());
  ASSERT_EQ(writeNpy(dir.file("in.npy"), fromFloat32(values, {n}, DType::F32)), "");
  ASSERT_EQ(runPython(dir, "with np.errstate(over='ignore'):\n"
                           "    np.save('" +
                               dir.file("out.npy") + "', np.load('" + dir.file("in.npy") +
                               "').astype(np.float16))\n"),
            0);
  Expected<Array> r = readNpy(dir.file("out.npy"));
  ASSERT_TRUE(r) << r.error;
  ASSERT_EQ(r->dtype, DType::F16);
  ASSERT_EQ(r->bytes.size(), values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t numpyBits;
    std::memcpy(&numpyBits, r->bytes.data() + 2 * i, 2);
    ASSERT_EQ(floatToF16Bits(values[i]), numpyBits) << "value " << values[i];
  }
}
