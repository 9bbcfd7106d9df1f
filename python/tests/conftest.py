import os
import sys

# Run from a checkout without installing: python/ on the path (an installed lazydt wins).
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_chunk(n, k, i):
    """Start and length of part i of torch.chunk(n, k): chunks of ceil(n / k)."""
    c = -(-n // k) if k else 0
    start = min(i * c, n)
    return start, max(0, min(c, n - start))
