// A fixed pool of worker threads for running a kernel's work items.
#ifndef PEJIT_RUNTIME_THREADPOOL_H
#define PEJIT_RUNTIME_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pejit {

class ThreadPool {
public:
  /// `threads` workers (at least 1), with the default (8 MB) stacks.
  /// `beforeWorkerStart(worker)` runs first on each worker's thread, before
  /// it looks at the pool: tests delay start-up with it to check that no
  /// parallelFor published meanwhile is lost.
  explicit ThreadPool(int threads, std::function<void(int)> beforeWorkerStart = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Runs body(i) for i in [0, count) on the workers, items handed out in
  /// runs that shrink to one item as the call nears its end (so uneven
  /// items, like causal tiles, balance, and short ones cost no lock
  /// each); the caller waits. One parallelFor at a time per pool;
  /// concurrent callers are serialized.
  void parallelFor(int64_t count, const std::function<void(int64_t)> &body);
  int threads() const { return static_cast<int>(workers_.size()); }

private:
  void workerLoop(int64_t seen);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::mutex callMutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)> *body_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0}; // the next item to take; past count_ when all are taken
  int64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_THREADPOOL_H
