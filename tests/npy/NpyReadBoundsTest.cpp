// readNpy reads the header before any data and never more data than the
// header declares: a non-.npy stream (/dev/zero) fails after its first bytes
// instead of reading until memory runs out, and a header that declares more
// data than the file holds fails before that data is allocated.
#include "pejit/runtime/npy/Npy.h"
#include "tests/npy/NpyTestSupport.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace pejit::npy;
using namespace pejit::npytest;

namespace {

TEST(NpyReadBounds, DevZeroFailsAtTheMagic) {
  Expected<Array> result = readNpy("/dev/zero");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error, "/dev/zero: not a .npy file (bad magic)");
}

TEST(NpyReadBounds, HugeDeclaredShapeFailsBeforeReadingData) {
  TempDir dir;
  // 2^40 float32 elements (4 TiB) declared, 16 bytes present.
  std::vector<uint8_t> bytes =
      buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }",
               std::vector<uint8_t>(16, 0));
  writeFileBytes(dir.file("big.npy"), bytes.data(), bytes.size());
  Expected<Array> result = readNpy(dir.file("big.npy"));
  ASSERT_FALSE(result);
  EXPECT_NE(result.error.find("needs 4398046511104 bytes of data but the file has 16"),
            std::string::npos)
      << result.error;
}

TEST(NpyReadBounds, HeaderLengthBeyondTheLimitFails) {
  TempDir dir;
  // Version 2.0, header length 0xFFFFFFFF.
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xFF, 0xFF, 0xFF, 0xFF};
  writeFileBytes(dir.file("header.npy"), bytes.data(), bytes.size());
  Expected<Array> result = readNpy(dir.file("header.npy"));
  ASSERT_FALSE(result);
  EXPECT_NE(result.error.find("header of 4294967295 bytes is beyond the limit of 1048576"),
            std::string::npos)
      << result.error;
}

// A stream (a pipe) that keeps writing past the declared data: the reader
// stops one byte past it and reports the extra data; the writer is not
// drained to its end.
TEST(NpyReadBounds, EndlessStreamAfterTheDataIsRejected) {
  TempDir dir;
  std::string fifo = dir.file("stream.npy");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<uint8_t> bytes = buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                                        std::vector<uint8_t>(16, 0));
  std::signal(SIGPIPE, SIG_IGN); // the writer's write after the reader closed: EPIPE
  std::thread writer([&] {
    int fd = ::open(fifo.c_str(), O_WRONLY);
    if (fd < 0)
      return;
    ssize_t ignored = ::write(fd, bytes.data(), bytes.size());
    std::vector<uint8_t> more(1 << 16, 0x41);
    // Up to 64 MiB more; the reader closes the pipe long before (EPIPE).
    for (int i = 0; i < 1024 && ignored >= 0; ++i)
      ignored = ::write(fd, more.data(), more.size());
    ::close(fd);
  });
  Expected<Array> result = readNpy(fifo);
  writer.join();
  ASSERT_FALSE(result);
  EXPECT_NE(result.error.find("needs 16 bytes of data but the file has 17"), std::string::npos)
      << result.error;
}

} // namespace
