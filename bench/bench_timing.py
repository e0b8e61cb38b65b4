"""Timing shared by the PyTorch peer scripts in bench/ (compare_*.py): they
run as scripts, so this directory is on their import path."""

import statistics
import time


def median_ms(fn, repeats):
    """Median wall-clock ms of fn over `repeats` runs, after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
