"""PyTorch's fused attention on the prefill shape of infer_kernels_test --bench (same call, same card):
causal, 32 query heads sharing 8 KV heads, head_dim 128, BF16, contiguous K/V (no paging).
CUDA events around single calls, 5 warm-ups, median of 21. Prints TFLOP/s counting causal pairs."""
import sys

import torch
import torch.nn.functional as F

heads, kv_heads, d = 32, 8, 128
for n in (8192, 16384):
    q = torch.randn(1, heads, n, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, kv_heads, n, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, kv_heads, n, d, device="cuda", dtype=torch.bfloat16)
    # GQA expanded once outside the timing (what a serving engine without GQA kernels would do).
    ke = k.repeat_interleave(heads // kv_heads, dim=1)
    ve = v.repeat_interleave(heads // kv_heads, dim=1)
    times = []
    for i in range(26):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        F.scaled_dot_product_attention(q, ke, ve, is_causal=True)
        b.record()
        torch.cuda.synchronize()
        if i >= 5:
            times.append(a.elapsed_time(b))
    times.sort()
    ms = times[len(times) // 2]
    pairs = n * (n + 1) / 2
    print(f"torch {torch.__version__} SDPA causal q={n} heads {heads}/{kv_heads} D {d}: {ms:.3f} ms "
          f"{4 * d * pairs * heads / ms / 1e9:.1f} TFLOP/s", flush=True)
sys.exit(0)
