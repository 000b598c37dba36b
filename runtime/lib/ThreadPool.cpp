//===- ThreadPool.cpp - Fixed pool of worker threads ----------------------===//
//
// Scheduling policy (no oversubscription):
//  - A pool runs one parallelFor ("job") at a time. A call that finds the
//    pool busy (another thread's job), or that comes from inside a chunk of
//    any pool (nested), runs fn(0, n) inline on its caller rather than queue
//    behind the job or wake more threads than there are cores. Nested calls
//    thus cost nothing extra and can never deadlock.
//  - A job is cut into at most threads() chunks up front; the caller and the
//    woken workers claim chunks from a shared counter under the pool mutex,
//    so a worker that is slow to wake (e.g. on a loaded machine) simply
//    leaves its chunk to whoever is free.
//  - A worker that runs out of chunks, and a caller waiting for the last
//    chunk, first spin for up to kSpinMicroseconds, then sleep on a
//    condition variable. Waking a sleeping thread took tens of microseconds
//    on the VMs here, more than many kernels take: a network of 50 kernels
//    on two threads ran slower than on one.
//
// Threading: State's mutex guards every job field; fn is only called with
// the mutex released. The caller waits until every chunk has finished, so
// `fn` (owned by the caller's frame) outlives every use of it.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::rt {

namespace {

/// True while this thread runs a chunk of some pool: parallelFor then runs
/// inline.
thread_local bool insideChunk = false;

/// How [0, n) is cut: `count` chunks of whole `align`-element blocks
/// (the final block may be partial). Chunks get `base` blocks each and the
/// last `extra` of them one more, so the last chunk, which holds the partial
/// block, is never the short one.
struct ChunkPlan {
  int64_t n = 0;
  int64_t align = ThreadPool::kChunkAlignment;
  int64_t count = 0;
  int64_t base = 0;
  int64_t extra = 0;

  int64_t begin(int64_t chunk) const {
    if (chunk >= count)
      return n;
    int64_t firstLong = count - extra;
    int64_t block = base * chunk + std::max<int64_t>(0, chunk - firstLong);
    return std::min(n, block * align);
  }
  int64_t end(int64_t chunk) const { return begin(chunk + 1); }
};

/// How long a thread polls before it sleeps (see the top of the file).
constexpr int64_t kSpinMicroseconds = 100;

/// Polls `ready` (a few hundred cycles apart) until it holds or about
/// kSpinMicroseconds have passed; returns whether it held.
template <typename Ready> bool spinUntil(Ready ready) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (ready())
      return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 63 && std::chrono::steady_clock::now() - start >
                            std::chrono::microseconds(kSpinMicroseconds))
      return ready();
  }
}

ChunkPlan makePlan(int64_t n, int64_t grain, size_t threads, int64_t align) {
  align = std::max<int64_t>(align, 1);
  grain = std::max<int64_t>(grain, 1);
  int64_t grainBlocks = grain / align + (grain % align != 0);
  int64_t fullBlocks = n / align;
  int64_t blocks = fullBlocks + (n % align != 0);
  // Every chunk gets at least fullBlocks / count >= grainBlocks whole blocks.
  int64_t count = std::clamp<int64_t>(fullBlocks / grainBlocks, 1,
                                      static_cast<int64_t>(threads));
  ChunkPlan plan;
  plan.n = n;
  plan.align = align;
  plan.count = count;
  plan.base = blocks / count;
  plan.extra = blocks % count;
  return plan;
}

} // namespace

struct ThreadPool::State {
  size_t threads = 1;
  std::vector<std::thread> workers;

  std::mutex mutex;
  /// Workers wait here for chunks to claim or for shutdown.
  std::condition_variable wake;
  /// The job's caller waits here for `remaining` to reach 0.
  std::condition_variable done;
  /// Written under the mutex; atomic so that a spinning worker may poll it.
  std::atomic<bool> stopping{false};

  // The current job; meaningful while `busy`.
  bool busy = false;
  const std::function<void(int64_t, int64_t)> *fn = nullptr;
  ChunkPlan plan;
  int64_t nextChunk = 0;
  int64_t chunkCount = 0;
  /// Written under the mutex; atomic so that spinning threads may poll.
  std::atomic<int64_t> remaining{0};
  /// Jobs posted so far (under the mutex): a spinning worker polls it.
  std::atomic<uint64_t> posted{0};
  std::exception_ptr error;

  /// Runs one chunk with the mutex released; returns what it threw.
  std::exception_ptr runChunk(int64_t chunk) {
    insideChunk = true;
    std::exception_ptr thrown;
    try {
      (*fn)(plan.begin(chunk), plan.end(chunk));
    } catch (...) {
      thrown = std::current_exception();
    }
    insideChunk = false;
    return thrown;
  }

  /// With the mutex held: records a finished chunk.
  void finishChunk(std::exception_ptr thrown) {
    if (thrown && !error)
      error = std::move(thrown);
    if (--remaining == 0)
      done.notify_one();
  }

  void workerLoop() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (nextChunk >= chunkCount && !stopping) {
        uint64_t seen = posted.load(std::memory_order_relaxed);
        lock.unlock();
        spinUntil([&] {
          return posted.load(std::memory_order_acquire) != seen ||
                 stopping.load(std::memory_order_relaxed);
        });
        lock.lock();
      }
      wake.wait(lock, [&] { return nextChunk < chunkCount || stopping; });
      // Pending chunks are finished even when stopping, so that a caller
      // never waits for a chunk nobody will run.
      if (nextChunk >= chunkCount)
        return;
      int64_t chunk = nextChunk++;
      lock.unlock();
      std::exception_ptr thrown = runChunk(chunk);
      lock.lock();
      finishChunk(std::move(thrown));
    }
  }
};

ThreadPool::ThreadPool(size_t threads) : state_(std::make_unique<State>()) {
  threads = std::clamp<size_t>(threads, 1, kMaxThreads);
  for (size_t i = 1; i < threads; ++i) {
    try {
      state_->workers.emplace_back([s = state_.get()] { s->workerLoop(); });
    } catch (const std::system_error &e) {
      std::fprintf(stderr,
                   "kiln: warning: cannot start thread %zu of %zu (%s); "
                   "using %zu threads\n",
                   i + 1, threads, e.what(), i);
      break;
    }
  }
  state_->threads = state_->workers.size() + 1;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  for (std::thread &worker : state_->workers) {
    // exit() called from inside a chunk runs this on a worker: that thread
    // cannot join itself, and exit() never returns to it.
    if (worker.get_id() == std::this_thread::get_id())
      worker.detach();
    else if (worker.joinable())
      worker.join();
  }
}

size_t ThreadPool::threads() const { return state_->threads; }

void ThreadPool::parallelFor(
    int64_t n, int64_t grain,
    const std::function<void(int64_t begin, int64_t end)> &fn, int64_t alignment) {
  if (n <= 0)
    return;
  State &s = *state_;
  ChunkPlan plan = makePlan(n, grain, s.threads, alignment);
  if (plan.count == 1 || insideChunk) {
    fn(0, n);
    return;
  }

  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.busy) {
    lock.unlock();
    fn(0, n);
    return;
  }
  s.busy = true;
  s.fn = &fn;
  s.plan = plan;
  s.nextChunk = 0;
  s.chunkCount = plan.count;
  s.remaining = plan.count;
  s.error = nullptr;
  s.posted.fetch_add(1, std::memory_order_release);
  lock.unlock();
  // The caller takes a chunk itself: wake one worker per other chunk.
  for (int64_t i = 1; i < plan.count; ++i)
    s.wake.notify_one();

  lock.lock();
  while (s.nextChunk < s.chunkCount) {
    int64_t chunk = s.nextChunk++;
    lock.unlock();
    std::exception_ptr thrown = s.runChunk(chunk);
    lock.lock();
    s.finishChunk(std::move(thrown));
  }
  if (s.remaining != 0) {
    lock.unlock();
    spinUntil([&] { return s.remaining.load(std::memory_order_acquire) == 0; });
    lock.lock();
  }
  s.done.wait(lock, [&] { return s.remaining == 0; });
  std::exception_ptr error = std::exchange(s.error, nullptr);
  s.busy = false;
  s.fn = nullptr;
  s.nextChunk = s.chunkCount = 0;
  lock.unlock();
  if (error)
    std::rethrow_exception(error);
}

StatusOr<size_t> ThreadPool::parseThreadCount(const char *text) {
  std::string shown = text ? text : "";
  Status bad = Status::invalidArgument(
      "KILN_NUM_THREADS='" + shown +
      "' is not a valid thread count: expected an integer from 1 to " +
      std::to_string(kMaxThreads) + " (or leave it unset for one per core)");
  if (shown.empty() || shown.size() > 4)
    return bad;
  size_t value = 0;
  for (char c : shown) {
    if (c < '0' || c > '9')
      return bad;
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  if (value < 1 || value > kMaxThreads)
    return bad;
  return value;
}

size_t ThreadPool::threadCountFromEnvironment() {
  size_t cores = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                    kMaxThreads);
  const char *text = std::getenv("KILN_NUM_THREADS");
  if (!text || !*text)
    return cores;
  StatusOr<size_t> count = parseThreadCount(text);
  if (count.isOk())
    return *count;
  std::fprintf(stderr, "kiln: warning: %s; using %zu threads\n",
               count.status().message().c_str(), cores);
  return cores;
}

ThreadPool &ThreadPool::get() {
  static ThreadPool pool(threadCountFromEnvironment());
  return pool;
}

} // namespace kiln::rt
