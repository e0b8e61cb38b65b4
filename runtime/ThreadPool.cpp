#include "runtime/ThreadPool.h"

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

// Takes items until none are left; mutex_ is held on entry and exit.
void ThreadPool::drain() {
  while (next_ < count_) {
    int64_t item = next_++;
    const std::function<void(int64_t)> *body = body_;
    mutex_.unlock();
    (*body)(item);
    mutex_.lock();
  }
}

void ThreadPool::workerLoop(int64_t seen) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_)
      return;
    seen = generation_;
    ++busy_;
    drain(); // the unique_lock holds mutex_, as drain() expects
    if (--busy_ == 0)
      done_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t count, const std::function<void(int64_t)> &body) {
  if (count <= 0)
    return;
  std::lock_guard<std::mutex> call(callMutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  body_ = &body;
  count_ = count;
  next_ = 0;
  ++generation_;
  wake_.notify_all();
  // The workers run every item: kernels keep ~330 KB of tiles on the stack,
  // which a caller's thread (perhaps with a small stack) must not need.
  done_.wait(lock, [&] { return next_ == count_ && busy_ == 0; });
  body_ = nullptr;
}

} // namespace pejit
