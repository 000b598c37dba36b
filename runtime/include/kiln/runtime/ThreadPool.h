//===- ThreadPool.h - Fixed pool of worker threads --------------*- C++ -*-===//
//
// The CPU device runs kernels over element ranges split across a fixed set
// of threads: threads() - 1 workers plus the thread that calls parallelFor.
//
// Ownership: get() is the process's pool, created on first use and destroyed
// at exit (its destructor joins the workers); it must not be used from other
// static destructors. Pools made with the constructor belong to their owner.
//
// Threading: parallelFor may be called from any thread. A pool runs one
// parallelFor at a time; a call made meanwhile from another thread, or from
// inside a chunk (nested), runs inline on its caller instead of queuing, so
// the process never has more busy threads than threads() per pool.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_THREADPOOL_H
#define KILN_RUNTIME_THREADPOOL_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace kiln::rt {

class ThreadPool {
public:
  /// Chunk boundaries are multiples of this many elements (except n).
  static constexpr int64_t kChunkAlignment = 16;
  /// The most threads a pool may have (KILN_NUM_THREADS's upper bound).
  static constexpr size_t kMaxThreads = 1024;

  /// The process's pool: KILN_NUM_THREADS threads if set, non-empty and
  /// valid (a bad value gets one warning on stderr), otherwise
  /// std::thread::hardware_concurrency().
  static ThreadPool &get();

  /// A pool of `threads` threads in all (the caller included): starts
  /// threads - 1 workers. 0 is taken as 1; more than kMaxThreads as that.
  explicit ThreadPool(size_t threads);
  /// Joins the workers after any parallelFor in progress has finished.
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Threads that run chunks: the workers plus the caller.
  size_t threads() const;

  /// Calls fn(begin, end) over disjoint chunks covering [0, n) and returns
  /// when all have finished; the calling thread runs chunks too. There are
  /// at most threads() chunks, each of at least `grain` elements unless a
  /// single chunk covers all; boundaries are multiples of `alignment`
  /// (kChunkAlignment keeps vectorized loops over the elements aligned; 1
  /// suits iterations that are each a whole loop, such as a row or a panel).
  /// n <= 0 calls nothing; grain < 1 is taken as 1. If fn throws, the first
  /// exception is rethrown here once every chunk has finished.
  void parallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t begin, int64_t end)> &fn,
                   int64_t alignment = kChunkAlignment);

  /// A thread count as KILN_NUM_THREADS gives it: decimal digits only, from
  /// 1 to kMaxThreads. Anything else (null, "", "0", " 4", "+4", "4x") is an
  /// InvalidArgument naming the variable.
  static StatusOr<size_t> parseThreadCount(const char *text);

  /// The size get() uses, from the environment; warns on stderr about a bad
  /// KILN_NUM_THREADS each time it is called (get() calls it once).
  static size_t threadCountFromEnvironment();

  struct State;

private:
  std::unique_ptr<State> state_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_THREADPOOL_H
