//===- NpyTest.cpp - .npy round trips, header layout, errors and writing ---===//
#include "pejit/runtime/npy/Npy.h"
#include "tests/npy/NpyTestSupport.h"

#include <csignal>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace pejit::npy;
using namespace pejit::npytest;

namespace {

const DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};

Array randomArray(SeededRng &rng, DType dtype, std::vector<int64_t> shape) {
  Array a{dtype, std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : a.shape)
    n *= d;
  a.bytes = rng.bytes(static_cast<size_t>(n) * elementSize(dtype));
  return a;
}

std::vector<uint8_t> bytesOf(const std::string &s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

/// The error parseNpy gives for bytes, named "q.npy".
std::string parseError(const std::vector<uint8_t> &bytes) {
  Expected<Array> r = parseNpy(bytes.data(), bytes.size(), "q.npy");
  EXPECT_FALSE(r) << "expected an error";
  return r.error;
}

std::string dictFor(const std::string &descr, const std::string &shape,
                    const std::string &fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

} // namespace

TEST(NpyRoundTrip, EveryDTypeAndShapeInMemoryAndOnDisk) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {7}, {2, 3, 5}, {1, 2, 3, 4}};
  for (DType dtype : kAllDTypes)
    for (const auto &shape : shapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeToString(shape));
      Array a = randomArray(rng, dtype, shape);
      std::vector<uint8_t> bytes = serializeNpy(a);
      Expected<Array> parsed = parseNpy(bytes.data(), bytes.size(), "mem");
      ASSERT_TRUE(parsed) << parsed.error;
      EXPECT_EQ(parsed->dtype, dtype);
      EXPECT_EQ(parsed->shape, shape);
      EXPECT_EQ(parsed->bytes, a.bytes);

      std::string path = dir.file("a.npy");
      ASSERT_EQ(writeNpy(path, a), "");
      Expected<Array> read = readNpy(path);
      ASSERT_TRUE(read) << read.error;
      EXPECT_EQ(read->dtype, dtype);
      EXPECT_EQ(read->shape, shape);
      EXPECT_EQ(read->bytes, a.bytes);
      EXPECT_EQ(read->numel(), static_cast<int64_t>(a.bytes.size() / elementSize(dtype)));
    }
}

TEST(NpyFormat, HeaderIsVersion1PythonDictAlignedTo64) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  struct Case {
    DType dtype;
    const char *descr;
    std::vector<int64_t> shape;
    const char *py;
  };
  const Case cases[] = {{DType::F32, "<f4", {2, 3}, "(2, 3)"},
                        {DType::F16, "<f2", {7}, "(7,)"},
                        {DType::BF16, "<u2", {}, "()"},
                        {DType::I32, "<i4", {0}, "(0,)"},
                        {DType::I64, "<i8", {1, 2, 3, 4}, "(1, 2, 3, 4)"}};
  for (const Case &c : cases) {
    Array a = randomArray(rng, c.dtype, c.shape);
    std::vector<uint8_t> b = serializeNpy(a);
    ASSERT_GE(b.size(), 10u);
    EXPECT_EQ(std::string(b.begin(), b.begin() + 6), "\x93NUMPY");
    EXPECT_EQ(b[6], 1);
    EXPECT_EQ(b[7], 0);
    size_t headerLength = b[8] | (size_t(b[9]) << 8);
    size_t dataStart = 10 + headerLength;
    EXPECT_EQ(dataStart % 64, 0u);
    ASSERT_EQ(b.size(), dataStart + a.bytes.size());
    std::string header(b.begin() + 10, b.begin() + dataStart);
    EXPECT_EQ(header.back(), '\n');
    EXPECT_EQ(header.rfind("{'descr': '" + std::string(c.descr) +
                               "', 'fortran_order': False, 'shape': " + c.py + ", }",
                           0),
              0u)
        << header;
    EXPECT_EQ(header.find_first_not_of(' ', header.find('}') + 1), header.size() - 1);
  }
}

TEST(NpyFormat, HugeHeaderIsWrittenAsVersion2) {
  // 30000 unit dims make a header over 65535 bytes; one element of data.
  Array a{DType::F32, std::vector<int64_t>(30000, 1), {1, 2, 3, 4}};
  std::vector<uint8_t> b = serializeNpy(a);
  ASSERT_GT(b.size(), 12u);
  EXPECT_EQ(b[6], 2);
  size_t headerLength = 0;
  for (int i = 0; i < 4; ++i)
    headerLength |= size_t(b[8 + i]) << (8 * i);
  EXPECT_GT(headerLength, 65535u);
  EXPECT_EQ((12 + headerLength) % 64, 0u);
  Expected<Array> r = parseNpy(b.data(), b.size(), "big.npy");
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r->shape, a.shape);
  EXPECT_EQ(r->bytes, a.bytes);
}

TEST(NpyParse, HandBuiltVersion2And3Headers) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  for (int major : {2, 3}) {
    std::vector<uint8_t> data = rng.bytes(3 * 2 * 4);
    std::vector<uint8_t> file = buildNpy(dictFor("<i4", "(3, 2)"), data, major);
    Expected<Array> r = parseNpy(file.data(), file.size(), "v.npy");
    ASSERT_TRUE(r) << r.error;
    EXPECT_EQ(r->dtype, DType::I32);
    EXPECT_EQ(r->shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(r->bytes, data);
  }
}

TEST(NpyParse, AcceptsValidHeaderVariations) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<uint8_t> data = rng.bytes(6 * 4);
  struct Case {
    std::string dict;
    size_t align;
    DType dtype;
  };
  const Case cases[] = {
      // Old NumPy aligned to 16; Python 2 wrote long ints as 3L.
      {dictFor("<f4", "(2, 3)"), 16, DType::F32},
      {"{'descr':'<f4','fortran_order':False,'shape':(2L,3L)}", 64, DType::F32},
      {"{\"shape\": (2, 3), \"descr\": \"=i4\", \"fortran_order\": False}", 64, DType::I32},
      {"{'descr': 'f4', 'shape': (6,), 'extra': [1, {'a': None}]}", 64, DType::F32},
      // Fortran order with a single non-unit dim is the same layout.
      {dictFor("<u2", "(1, 12)", "True"), 64, DType::BF16},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.dict);
    std::vector<uint8_t> file = buildNpy(c.dict, data, 1, c.align);
    Expected<Array> r = parseNpy(file.data(), file.size(), "v.npy");
    ASSERT_TRUE(r) << r.error;
    EXPECT_EQ(r->dtype, c.dtype);
    EXPECT_EQ(r->bytes, data);
  }
}

TEST(NpyErrors, EveryMalformedInputNamesTheFileAndTheProblem) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<uint8_t> six = rng.bytes(24), good = buildNpy(dictFor("<f4", "(2, 3)"), six);
  auto withDict = [&](const std::string &dict, size_t dataBytes = 24) {
    return buildNpy(dict, std::vector<uint8_t>(six.begin(), six.begin() + dataBytes));
  };
  std::vector<uint8_t> v4 = good;
  v4[6] = 4;
  struct Case {
    std::vector<uint8_t> bytes;
    std::string phrase;
  };
  const Case cases[] = {
      {bytesOf("PK\x03\x04 this is a zip"), "q.npy: not a .npy file (bad magic)"},
      {{}, "q.npy: truncated header"},
      {std::vector<uint8_t>(good.begin(), good.begin() + 9), "q.npy: truncated header"},
      {std::vector<uint8_t>(good.begin(), good.begin() + 40), "q.npy: truncated header"},
      {v4, "q.npy: unsupported .npy format version 4.0"},
      {withDict("[1, 2, 3]"), "q.npy: header is not a Python dict"},
      {withDict("{'descr': '<f4', 'shape': (2, 3)"), "q.npy: malformed header dict"},
      {withDict("{'descr': '<f4' 'shape': (2, 3)}"), "q.npy: malformed header dict"},
      {withDict("{'descr': '<f4', 'shape': (2, 3)} x"), "q.npy: malformed header dict"},
      {withDict("{'fortran_order': False, 'shape': (2, 3)}"), "q.npy: header has no 'descr' key"},
      {withDict("{'descr': '<f4', 'fortran_order': False}"), "q.npy: header has no 'shape' key"},
      {withDict(dictFor("<f4", "(2, 3)", "True")),
       "q.npy: fortran_order=True is not supported (save with np.ascontiguousarray)"},
      {withDict(dictFor("<f8", "(3,)")),
       "q.npy: '<f8' (float64) is not supported; use float32, float16, "
       "bfloat16 (as uint16), int32 or int64"},
      {withDict(dictFor("|u1", "(24,)")), "q.npy: '|u1' (uint8) is not supported"},
      {withDict(dictFor("<c8", "(3,)")), "q.npy: '<c8' (complex64) is not supported"},
      {withDict(dictFor(">f4", "(2, 3)")), "q.npy: big-endian '>f4' is not supported"},
      {withDict(dictFor("|f4", "(2, 3)")), "q.npy: dtype '|f4' is ambiguous"},
      {withDict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}"),
       "q.npy: structured dtypes are not supported"},
      {withDict(dictFor("<f4", "(2, 3)"), 20),
       "q.npy: shape (2, 3) of float32 needs 24 bytes of data but the file has 20"},
      {withDict(dictFor("<f4", "(5,)")),
       "q.npy: shape (5,) of float32 needs 20 bytes of data but the file has 24"},
      {withDict(dictFor("<f4", "(2, -3)")), "q.npy: shape (2, -3) has a negative dimension"},
      {withDict(dictFor("<f4", "(99999999999999999999,)")),
       "q.npy: shape dimension 99999999999999999999 is too large"},
      {withDict(dictFor("<f4", "(4611686018427387904, 4)")),
       "q.npy: shape (4611686018427387904, 4) of float32 is too large"},
      {withDict("{'descr': '<f4', 'shape': 6}"), "q.npy: 'shape' is not a tuple"},
      {withDict("{'descr': '<f4', 'shape': ('6',)}"), "q.npy: 'shape' holds a non-integer"},
      {withDict("{'descr': 4, 'shape': (6,)}"), "q.npy: 'descr' is not a string"},
      {withDict("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}"),
       "q.npy: 'fortran_order' is not True or False"},
      {withDict("{'descr': '<f4', 'shape': " + std::string(40, '(') + "6" + std::string(40, ')') +
                "}"),
       "q.npy: malformed header dict (nested too deeply"},
  };
  for (const Case &c : cases) {
    std::string error = parseError(c.bytes);
    EXPECT_NE(error.find(c.phrase), std::string::npos)
        << "error: " << error << "\nexpected: " << c.phrase;
    EXPECT_EQ(error.rfind("q.npy: ", 0), 0u) << error;
  }
}

TEST(NpyErrors, CorruptedFilesGiveAnArrayOrAMessageNeverACrash) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  for (int i = 0; i < 20000; ++i) {
    Array a =
        randomArray(rng, kAllDTypes[rng.integer(0, 4)], {rng.integer(0, 3), rng.integer(1, 4)});
    std::vector<uint8_t> b = serializeNpy(a);
    for (int64_t flips = rng.integer(1, 4); flips > 0; --flips)
      b[size_t(rng.integer(0, 70))] = static_cast<uint8_t>(rng.bits());
    b.resize(size_t(rng.integer(0, int64_t(b.size()))));
    Expected<Array> r = parseNpy(b.data(), b.size(), "q.npy");
    if (r) {
      EXPECT_EQ(validateArray(*r), "");
    } else {
      ASSERT_EQ(r.error.rfind("q.npy: ", 0), 0u) << r.error;
    }
  }
}

TEST(NpyErrors, ReadingMissingOrUnreadableFiles) {
  TempDir dir;
  std::string missing = dir.file("missing.npy");
  Expected<Array> r = readNpy(missing);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error, missing + ": cannot open: " + std::strerror(ENOENT));
  r = readNpy(dir.path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error, dir.path() + ": cannot read: " + std::strerror(EISDIR));
  std::string bad = dir.file("q.npy");
  writeFileBytes(bad, "not numpy at all", 16);
  r = readNpy(bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error, bad + ": not a .npy file (bad magic)");
}

TEST(NpyWrite, LeavesNoTempFilesAndUsesTheUmask) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  std::string path = dir.file("out.npy");
  for (int i = 0; i < 3; ++i) { // create, then replace twice
    Array a = randomArray(rng, DType::F32, {rng.integer(0, 50)});
    ASSERT_EQ(writeNpy(path, a), "");
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.npy"});
    std::vector<uint8_t> expected = serializeNpy(a);
    EXPECT_EQ(readFileBytes(path), std::string(expected.begin(), expected.end()));
  }
  mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST(NpyWrite, RelativePathWritesIntoTheCurrentDirectory) {
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(dir.path().c_str()), 0);
  Array a = randomArray(rng, DType::I64, {3});
  std::string error = writeNpy("rel.npy", a);
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_EQ(error, "");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"rel.npy"});
  Expected<Array> r = readNpy(dir.file("rel.npy"));
  ASSERT_TRUE(r) << r.error;
  EXPECT_EQ(r->bytes, a.bytes);
}

TEST(NpyWrite, ErrorsNameTheFileAndTheCause) {
  TempDir dir;
  Array a{DType::F32, {2, 3}, std::vector<uint8_t>(20)};
  std::string path = dir.file("q.npy");
  EXPECT_EQ(writeNpy(path, a), path + ": cannot write: shape (2, 3) of float32 "
                                      "needs 24 bytes of data but the array holds 20");
  EXPECT_TRUE(serializeNpy(a).empty());
  EXPECT_EQ(validateArray({DType::I64, {2, -1}, {}}),
            "shape (2, -1) of int64 is invalid (negative dimension or size overflow)");
  a.bytes.resize(24);
  std::string inMissingDir = dir.file("nodir/q.npy");
  std::string error = writeNpy(inMissingDir, a);
  EXPECT_EQ(error.rfind(inMissingDir + ": cannot create a temporary file", 0), 0u) << error;
  EXPECT_NE(error.find(std::strerror(ENOENT)), std::string::npos) << error;
  ASSERT_EQ(::mkdir(dir.file("sub").c_str(), 0777), 0);
  error = writeNpy(dir.file("sub"), a); // the target is a directory
  EXPECT_EQ(error.rfind(dir.file("sub") + ": cannot replace the file: ", 0), 0u) << error;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

TEST(NpyWrite, FailedWriteKeepsTheOldFile) {
  // A file-size limit makes write() fail with EFBIG even for root.
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  std::string path = dir.file("keep.npy");
  Array old = randomArray(rng, DType::F16, {5});
  ASSERT_EQ(writeNpy(path, old), "");
  std::string before = readFileBytes(path);
  Array big = randomArray(rng, DType::F32, {4096});
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error = writeNpy(path, big);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(error, path + ": cannot write: " + std::strerror(EFBIG));
  EXPECT_EQ(readFileBytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.npy"});
}

TEST(NpyWrite, UnwritableDirectoryKeepsTheOldFile) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: directory permissions do not stop root "
                    "(FailedWriteKeepsTheOldFile covers the failure path)";
  SeededRng rng;
  SCOPED_TRACE(rng.trace());
  TempDir dir;
  std::string path = dir.file("keep.npy");
  ASSERT_EQ(writeNpy(path, randomArray(rng, DType::I32, {4})), "");
  std::string before = readFileBytes(path);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  std::string error = writeNpy(path, randomArray(rng, DType::I32, {8}));
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_EQ(error.rfind(path + ": cannot create a temporary file", 0), 0u) << error;
  EXPECT_NE(error.find(std::strerror(EACCES)), std::string::npos) << error;
  EXPECT_EQ(readFileBytes(path), before);
}
