// ThreadPool: no interleaving of worker start-up and parallelFor loses a call
// (a lost call is a hang, so every test runs under a watchdog that fails the
// binary instead of blocking CI), and every item runs exactly once.
#include "pejit/runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace pejit {
namespace {

using namespace std::chrono_literals;

/// Fails the whole binary if `body` has not returned after `limit`: a hung
/// parallelFor cannot be cancelled, and the test must not block CI.
template <typename Body>
void withWatchdog(std::chrono::seconds limit, const char *what, Body body) {
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  std::thread watchdog([&] {
    if (done.wait_for(limit) == std::future_status::timeout) {
      std::fprintf(stderr, "[  FAILED  ] %s: no progress for %lld s (a parallelFor hung)\n", what,
                   static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::_Exit(1);
    }
  });
  body();
  finished.set_value();
  watchdog.join();
}

/// A gate the workers' start-up hook waits on.
struct Gate {
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    opened.wait(lock, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      open = true;
    }
    opened.notify_all();
  }
};

// The reported hang: every worker is scheduled only after the first
// parallelFor was published. Before the fix each worker took that call for
// one it had seen and parallelFor waited forever.
TEST(ThreadPool, CallPublishedBeforeAnyWorkerStartsIsRun) {
  withWatchdog(30s, "CallPublishedBeforeAnyWorkerStartsIsRun", [] {
    for (int round = 0; round < 20; ++round) {
      Gate gate;
      ThreadPool pool(2, [&](int) { gate.wait(); });
      std::atomic<int64_t> sum{0};
      std::thread caller([&] { pool.parallelFor(100, [&](int64_t i) { sum += i; }); });
      std::this_thread::sleep_for(5ms); // the call is published while the gate is shut
      gate.release();
      caller.join();
      EXPECT_EQ(sum.load(), 99 * 100 / 2) << "round " << round;
    }
  });
}

TEST(ThreadPool, EmptyCallReturnsWithoutWorkers) {
  withWatchdog(30s, "EmptyCallReturnsWithoutWorkers", [] {
    Gate gate;
    ThreadPool pool(2, [&](int) { gate.wait(); });
    int calls = 0;
    pool.parallelFor(0, [&](int64_t) { ++calls; });
    pool.parallelFor(-3, [&](int64_t) { ++calls; });
    EXPECT_EQ(calls, 0);
    gate.release();
  });
}

// 10,000 rounds: a fresh pool whose workers start after random delays, and
// three caller threads each publishing parallelFors right away (the callers
// are serialized, so calls pile up while workers are still starting). Every
// item must run exactly once.
TEST(ThreadPool, StressRandomWorkerStartDelays) {
  withWatchdog(300s, "StressRandomWorkerStartDelays", [] {
    constexpr int kRounds = 10000;
    std::mt19937 rng(20261201);
    for (int round = 0; round < kRounds; ++round) {
      int threads = 1 + static_cast<int>(rng() % 3);
      std::vector<int> delaysUs(threads);
      for (int &delay : delaysUs)
        delay = static_cast<int>(rng() % 4 == 0 ? 0 : rng() % 200);
      ThreadPool pool(threads, [&](int worker) {
        if (delaysUs[worker] > 0)
          std::this_thread::sleep_for(std::chrono::microseconds(delaysUs[worker]));
      });
      constexpr int kCallers = 3, kCallsEach = 2;
      std::vector<int64_t> counts(kCallers * kCallsEach);
      for (int64_t &count : counts)
        count = 1 + static_cast<int64_t>(rng() % 16);
      std::vector<std::vector<std::atomic<int>>> ran(counts.size());
      for (size_t c = 0; c < counts.size(); ++c)
        ran[c] = std::vector<std::atomic<int>>(static_cast<size_t>(counts[c]));
      std::vector<std::thread> callers;
      for (int caller = 0; caller < kCallers; ++caller)
        callers.emplace_back([&, caller] {
          for (int k = 0; k < kCallsEach; ++k) {
            size_t call = static_cast<size_t>(caller * kCallsEach + k);
            pool.parallelFor(counts[call], [&](int64_t i) { ran[call][i] += 1; });
          }
        });
      for (std::thread &caller : callers)
        caller.join();
      for (size_t c = 0; c < counts.size(); ++c)
        for (int64_t i = 0; i < counts[c]; ++i)
          ASSERT_EQ(ran[c][i].load(), 1) << "round " << round << " call " << c << " item " << i;
    }
  });
}

// One long-lived pool, several callers, thousands of calls each.
TEST(ThreadPool, ManyCallsFromSeveralThreads) {
  withWatchdog(120s, "ManyCallsFromSeveralThreads", [] {
    ThreadPool pool(2);
    constexpr int kCallers = 4, kCalls = 2500;
    std::atomic<int64_t> total{0};
    std::vector<std::thread> callers;
    for (int caller = 0; caller < kCallers; ++caller)
      callers.emplace_back([&, caller] {
        for (int call = 0; call < kCalls; ++call) {
          int64_t count = 1 + (call + caller) % 7;
          std::atomic<int64_t> seen{0};
          pool.parallelFor(count, [&](int64_t) { seen += 1; });
          ASSERT_EQ(seen.load(), count);
          total += count;
        }
      });
    for (std::thread &caller : callers)
      caller.join();
    int64_t expected = 0;
    for (int caller = 0; caller < kCallers; ++caller)
      for (int call = 0; call < kCalls; ++call)
        expected += 1 + (call + caller) % 7;
    EXPECT_EQ(total.load(), expected);
  });
}

// Calls of many items are handed out in runs (shrinking to single items):
// every item still runs exactly once, whatever the count and the callers.
TEST(ThreadPool, LargeCallsRunEveryItemExactlyOnce) {
  withWatchdog(120s, "LargeCallsRunEveryItemExactlyOnce", [] {
    std::mt19937 rng(20261205);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      constexpr int kCallers = 2, kCalls = 20;
      std::vector<std::thread> callers;
      std::vector<int64_t> counts(kCallers * kCalls);
      for (int64_t &count : counts)
        count = 1 + static_cast<int64_t>(rng() % 200000);
      for (int caller = 0; caller < kCallers; ++caller)
        callers.emplace_back([&, caller] {
          for (int call = 0; call < kCalls; ++call) {
            int64_t count = counts[static_cast<size_t>(caller * kCalls + call)];
            std::vector<std::atomic<uint8_t>> ran(static_cast<size_t>(count));
            pool.parallelFor(count, [&](int64_t i) { ran[static_cast<size_t>(i)] += 1; });
            int64_t wrong = 0;
            for (int64_t i = 0; i < count; ++i)
              wrong += ran[static_cast<size_t>(i)].load() != 1;
            ASSERT_EQ(wrong, 0) << threads << " threads, " << count << " items";
          }
        });
      for (std::thread &caller : callers)
        caller.join();
    }
  });
}

} // namespace
} // namespace pejit
