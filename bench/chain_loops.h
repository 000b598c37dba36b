// Hand-written C++ references for bench_cpu.cpp, compiled with -O3
// -march=native in their own file so they get the best the host compiler
// does without Kiln.
#ifndef KILN_BENCH_CHAIN_LOOPS_H
#define KILN_BENCH_CHAIN_LOOPS_H

#include <cstdint>

namespace kiln::bench {
/// y = tanh(x * w[c] + b[c]) * 0.5 - x * 0.25 over rows x cols, scalar
/// std::tanh, one thread.
void chainLoop(const float *x, const float *w, const float *b, float *y, int64_t rows,
               int64_t cols);
/// c = a + b over [begin, end): the memory-bandwidth limit.
void addLoop(const float *a, const float *b, float *c, int64_t begin, int64_t end);
} // namespace kiln::bench

#endif
