#include "pejit/runtime/ThreadPool.h"

#include <algorithm>

namespace pejit {

ThreadPool::ThreadPool(int threads, std::function<void(int)> beforeWorkerStart) {
  // Each worker starts having seen the generation of construction (no call
  // yet), however late its thread is scheduled: a worker that read the
  // generation itself on start-up took a call published before it ran for
  // one already done, and parallelFor waited forever when every worker did.
  for (int i = 0; i < std::max(threads, 1); ++i)
    workers_.emplace_back([this, i, hook = beforeWorkerStart] {
      if (hook)
        hook(i);
      workerLoop(/*seen=*/0);
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void ThreadPool::workerLoop(int64_t seen) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_)
      return;
    seen = generation_;
    // The call's body and count, read under the lock: parallelFor changes
    // them only while no worker is busy.
    ++busy_;
    const std::function<void(int64_t)> *body = body_;
    int64_t count = count_;
    lock.unlock();
    // Items are taken in runs, without the mutex: a call of thousands of
    // short items (a standalone RoPE: 8192 of ~0.4 us) spent a tenth of its
    // time handing the lock between the workers. A run is 1/8 of a
    // worker's share of what is left, so the last items still go one at a
    // time (uneven items, like causal tiles, balance).
    const int64_t parts = 8 * static_cast<int64_t>(workers_.size());
    int64_t first = next_.load(std::memory_order_relaxed);
    while (first < count) {
      int64_t run = std::max<int64_t>(1, (count - first) / parts);
      if (!next_.compare_exchange_weak(first, first + run, std::memory_order_relaxed))
        continue; // first now holds the current value
      for (int64_t item = first; item < first + run; ++item)
        (*body)(item);
      first = next_.load(std::memory_order_relaxed);
    }
    lock.lock();
    if (--busy_ == 0)
      done_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t count, const std::function<void(int64_t)> &body) {
  if (count <= 0)
    return;
  std::lock_guard<std::mutex> call(callMutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  // A worker that woke late for the previous call may still be busy (it
  // finds no item left): the next call's fields wait until it is done.
  done_.wait(lock, [&] { return busy_ == 0; });
  body_ = &body;
  count_ = count;
  next_.store(0, std::memory_order_relaxed);
  ++generation_;
  wake_.notify_all();
  // The workers run every item: kernels keep ~330 KB of tiles on the stack,
  // which a caller's thread (perhaps with a small stack) must not need.
  // Every item was taken once next_ reaches count_, and each worker that
  // took one is busy until it has run it.
  done_.wait(lock, [&] { return next_.load(std::memory_order_relaxed) >= count_ && busy_ == 0; });
  body_ = nullptr;
}

} // namespace pejit
