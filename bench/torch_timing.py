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
