"""torch.topk (K 2048) on the scores indexer_bench_cuda dumped, each shape it timed
(rows 1 to 2048 at L 131072 as prefixes of one array, 256 rows at L 262144), timed
with CUDA events the same way (median of 15 after 3 warm-ups): the baseline of SPEC
section 4 in the same job. Prints torch's time and, from DIR/aether_times.txt, how
many times faster aether's call was: the waiting call (it returns the verdict) and
the queued call (verdict left on the device, timed like torch.topk). Usage: python3 bench/indexer_topk_torch.py DIR"""
import os
import statistics
import sys

import numpy as np
import torch

folder = sys.argv[1]
ours = {}
for line in open(os.path.join(folder, "aether_times.txt")):
    rows, width, ms, queued_ms = line.split()
    ours[(int(rows), int(width))] = (float(ms), float(queued_ms))
for width in sorted({w for _, w in ours}):
    data = np.fromfile(os.path.join(folder, f"scores_{width}.bin"), dtype=np.float32).reshape(-1, width)
    for rows in sorted(r for r, w in ours if w == width):
        scores = torch.from_numpy(data[:rows]).cuda()
        for _ in range(3):
            torch.topk(scores, 2048, dim=1)
        times = []
        for _ in range(15):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.topk(scores, 2048, dim=1)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        t = statistics.median(times)
        mine, queued = ours[(rows, width)]
        print(f"torch.topk {rows} x {width}, K 2048: {t:.3f} ms (torch {torch.__version__}); "
              f"aether {mine:.3f} ms: {t / mine:.2f}x faster; queued {queued:.3f} ms: {t / queued:.2f}x faster")
        del scores
