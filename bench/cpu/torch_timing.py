"""Wall-clock timing shared by the PyTorch side of the CPU benchmarks (torch_models.py,
torch_chain.py): the median of `reps` calls after `warmup` untimed ones, in ms."""
import statistics
import time


def median_ms(fn, *args, reps, warmup=1):
    for _ in range(warmup):
        fn(*args)  # warm up (allocator, threads)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
