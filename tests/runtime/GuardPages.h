// Buffers whose last byte touches an inaccessible page (mmap + mprotect):
// a kernel that reads or writes one element past a buffer faults at once.
// AddressSanitizer cannot see JIT-compiled code, so this is how the tests
// bound what a kernel touches.
#ifndef PEJIT_TESTS_RUNTIME_GUARDPAGES_H
#define PEJIT_TESTS_RUNTIME_GUARDPAGES_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace pejit::testing {

class GuardedBuffer {
public:
  GuardedBuffer() = default;
  /// `bytes` of storage ending right before a PROT_NONE page.
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t dataPages = (bytes + page - 1) / page;
    mapped_ = (dataPages + 1) * page;
    void *base = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    // Built without exceptions: a failed map or protect is fatal.
    if (base == MAP_FAILED) {
      std::perror("GuardedBuffer: mmap");
      std::abort();
    }
    base_ = static_cast<char *>(base);
    if (mprotect(base_ + dataPages * page, page, PROT_NONE) != 0) {
      std::perror("GuardedBuffer: mprotect");
      std::abort();
    }
    data_ = base_ + dataPages * page - bytes;
  }
  GuardedBuffer(const GuardedBuffer &) = delete;
  GuardedBuffer &operator=(const GuardedBuffer &) = delete;
  GuardedBuffer(GuardedBuffer &&other) noexcept { *this = std::move(other); }
  GuardedBuffer &operator=(GuardedBuffer &&other) noexcept {
    std::swap(base_, other.base_);
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(mapped_, other.mapped_);
    return *this;
  }
  ~GuardedBuffer() {
    if (base_)
      munmap(base_, mapped_);
  }

  void *data() { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T> T *as() { return reinterpret_cast<T *>(data_); }

  /// Makes the data itself read-only too (an input the kernel must not write).
  void protectReadOnly() {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    char *first = base_ + ((data_ - base_) / page) * page;
    mprotect(first, static_cast<size_t>(base_ + mapped_ - page - first), PROT_READ);
  }

private:
  char *base_ = nullptr;
  char *data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;
};

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_GUARDPAGES_H
