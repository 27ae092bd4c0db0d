"""How the torch baselines are timed, like the C++ benches: CUDA events around one call,
the median of 15 after 3 warm-ups, in milliseconds."""
import statistics

import torch


def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(15):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
