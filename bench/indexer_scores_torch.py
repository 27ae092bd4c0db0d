"""The torch baseline of SPEC section 4 for the indexer scorer: bf16 matmul of the
T*H query rows against the L keys, relu, weighted sum over heads (fp32 weights),
T 64, L 131072, H 64, D 128, timed with CUDA events like the C++ benches (median of
15 after 3 warm-ups). Usage: python3 bench/indexer_scores_torch.py"""
import torch

from torch_timing import median_ms

T, L, H, D = 64, 131072, 64, 128
torch.manual_seed(5)
q = torch.randn(T * H, D, device="cuda").bfloat16()
k = torch.randn(L, D, device="cuda").bfloat16()
w = torch.randn(T, H, 1, device="cuda")


def scores():
    return (torch.relu(q @ k.t()).view(T, H, L) * w).sum(dim=1)


print(f"torch scores T {T} L {L} H {H} D {D}: {median_ms(scores):.3f} ms (torch {torch.__version__})")
