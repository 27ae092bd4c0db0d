"""torch.topk on the scores indexer_bench_cuda dumped (256 x 262144, K 2048), timed
with CUDA events the same way (median of 15 after 3 warm-ups): the baseline of
SPEC section 4 in the same job. Usage: python3 bench/indexer_topk_torch.py FILE"""
import statistics
import sys

import numpy as np
import torch

scores = torch.from_numpy(np.fromfile(sys.argv[1], dtype=np.float32).reshape(256, 262144)).cuda()
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
print(f"torch.topk 256 x 262144, K 2048: {statistics.median(times):.3f} ms (torch {torch.__version__})")
