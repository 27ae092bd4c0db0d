"""torch.topk (K 2048) on the scores indexer_bench_cuda dumped, each shape it timed
(rows 1 to 2048 at L 131072 as prefixes of one array, 256 rows at L 262144), timed
with CUDA events the same way (median of 15 after 3 warm-ups): the baseline of SPEC
section 4 in the same job. Prints torch's time and, from DIR/aether_times.txt, how
many times faster aether's call was: the waiting call (it returns the verdict) and
the queued call (verdict left on the device, timed like torch.topk). When DIR holds
distribution_times.txt (`indexer_bench_cuda distributions`), torch.topk is also timed on
each of those distributions, drawn here on the GPU from the same definitions
(bench/topk_distributions.hpp). Usage: python3 bench/indexer_topk_torch.py DIR"""
import os
import sys

import numpy as np
import torch

from torch_timing import median_ms

K = 2048


def distribution(name, rows, width):
    """The scores of bench/topk_distributions.cuh's distribution `name`, on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(11)
    normal = lambda: torch.randn(rows, width, device="cuda", generator=g)
    if name.startswith("gaussian"):
        return normal() + float(name[len("gaussian"):] or 0)
    if name == "16 distinct":
        return torch.randint(0, 16, (rows, width), device="cuda", generator=g).float()
    if name == "all equal":
        return torch.ones(rows, width, device="cuda")
    if name == "relu, K/2 positive":
        x = torch.zeros(rows, width, device="cuda")
        at = torch.randint(0, width, (rows, K // 2), device="cuda", generator=g)
        value = torch.empty(rows, K // 2, device="cuda").exponential_(generator=g) + 1e-3
        return x.scatter_(1, at, value)
    if name == "half tied at the K-th":
        x = normal()
        kth = torch.topk(x, K, dim=1).values[:, -1:].expand(rows, width)
        tie = (x < kth) & (torch.rand(rows, width, device="cuda", generator=g) < 0.5)
        return torch.where(tie, kth, x)
    if name == "ascending":
        return torch.arange(width, device="cuda").float().expand(rows, width).contiguous()
    if name == "descending":
        return (width - torch.arange(width, device="cuda")).float().expand(rows, width).contiguous()
    raise ValueError(name)


folder = sys.argv[1]
ours = {}
for line in open(os.path.join(folder, "aether_times.txt")):
    rows, width, ms, queued_ms = line.split()
    ours[(int(rows), int(width))] = (float(ms), float(queued_ms))
for width in sorted({w for _, w in ours}):
    data = np.fromfile(os.path.join(folder, f"scores_{width}.bin"), dtype=np.float32).reshape(-1, width)
    for rows in sorted(r for r, w in ours if w == width):
        scores = torch.from_numpy(data[:rows]).cuda()
        t = median_ms(lambda: torch.topk(scores, K, dim=1))
        mine, queued = ours[(rows, width)]
        print(f"torch.topk {rows} x {width}, K 2048: {t:.3f} ms (torch {torch.__version__}); "
              f"aether {mine:.3f} ms: {t / mine:.2f}x faster; queued {queued:.3f} ms: {t / queued:.2f}x faster")
        del scores

table = os.path.join(folder, "distribution_times.txt")
if os.path.exists(table):
    for line in open(table):
        name, rows, width, _, queued = line.rstrip("\n").split("\t")
        rows, width, queued = int(rows), int(width), float(queued)
        scores = distribution(name, rows, width)
        t = median_ms(lambda: torch.topk(scores, K, dim=1))
        print(f"torch.topk {name:22s} {rows:4d} x {width:6d}: {t:.3f} ms; aether queued "
              f"{queued:.3f} ms; torch / aether {t / queued:.2f}")
        del scores
