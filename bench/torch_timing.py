"""Shared by the PyTorch benchmark scripts: seconds per call of `fn`."""
import time


def measure(fn, seconds=1.0):
    fn()  # warm up
    runs, start = 0, time.perf_counter()
    while True:
        fn()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / runs


def measure_cuda(fn, runs=20):
    """Seconds per call of `fn` on the GPU: CUDA events around `runs` calls,
    the median of 7 such batches after 3 warm-up calls."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(7):
        start.record()
        for _ in range(runs):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / runs / 1e3)
    times.sort()
    return times[len(times) // 2]


def median(fn, runs, warmup=3):
    """Seconds of the median of `runs` calls of `fn`, after `warmup` calls:
    latency per inference, as the network comparisons report it."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]
