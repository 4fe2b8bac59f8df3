#!/usr/bin/env python3
"""The PyTorch reference that `gpuscout bench --only train-step` is compared with.

The same training step, written directly in PyTorch (eager, no Hugging Face): N Llama decoder
layers as gpuscout runs them (F.rms_norm, Q/K/V fused into one F.linear, RoPE on pairs
(i, i + D/2), F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) -- flash attention
in BF16 --, o-projection + residual, gate/up fused, SiLU * up, down + residual), BF16 parameters
and activations, a BF16 input that requires grad, loss = (y * P).sum() with a fixed random P,
then loss.backward(): every weight gradient and the input gradient, no optimizer step. FLOPs are
counted exactly as gpuscout counts them (model FLOPs: 3 x forward, causal attention = the lower
triangle), so TFLOP/s compare directly.

Prints one JSON line per case on stdout (and an env line first):
  {"case": "env", "torch": ..., "cuda": ..., "gpu": ..., "sdpa": ...}
  {"case": "train_step", "model", "layers", "micro_batch", "seq", "tokens", "flops_per_step",
   "step_ms" (median), "step_ms_min", "step_ms_max", "forward_ms", "backward_ms", "samples",
   "tokens_per_s", "model_tflops", "max_memory_allocated_bytes"}
Times: CUDA events around forward (incl. loss) and backward, median of --repeats steps after
--warmup steps.

  python3 bench/train_step_reference_torch.py [--layers 4] [--micro-batch 1,4] [--seq 2048,4096]
"""
import argparse
import json
import math
import statistics

import torch
import torch.nn.functional as F

# Llama-3.1-8B (data/models/llama-3.1-8b.toml).
SHAPES = {
    "llama-3.1-8b": dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, rope_theta=500000.0, eps=1e-5),
}


def model_flops(s, layers, batch, seq):
    """gpuscout's train_step_flops: 3 x (linear + causal attention) forward FLOPs."""
    h, d = s["hidden"], s["head_dim"]
    q_dim, kv_dim = s["heads"] * d, s["kv_heads"] * d
    matrix = h * (q_dim + 2 * kv_dim) + q_dim * h + 3 * h * s["ffn"]
    linear = 2.0 * batch * seq * matrix * layers
    attention = 4.0 * s["heads"] * d * seq * (seq + 1) / 2 * batch * layers
    return 3 * (linear + attention)


class Layers(torch.nn.Module):
    def __init__(self, s, layers, seq, device):
        super().__init__()
        self.s = s
        h, d, f = s["hidden"], s["head_dim"], s["ffn"]
        self.q_dim, self.kv_dim = s["heads"] * d, s["kv_heads"] * d
        bf16 = torch.bfloat16

        def mat(out_f, in_f):  # variance 1/in, like gpuscout's weights
            return torch.nn.Parameter(torch.randn(out_f, in_f, device=device, dtype=bf16) / math.sqrt(in_f))

        self.w = torch.nn.ModuleList()
        for _ in range(layers):
            m = torch.nn.Module()
            m.attn_norm = torch.nn.Parameter(torch.ones(h, device=device, dtype=bf16))
            m.qkv = mat(self.q_dim + 2 * self.kv_dim, h)
            m.o = mat(h, self.q_dim)
            m.mlp_norm = torch.nn.Parameter(torch.ones(h, device=device, dtype=bf16))
            m.gate_up = mat(2 * f, h)
            m.down = mat(h, f)
            self.w.append(m)
        inv_freq = s["rope_theta"] ** (-torch.arange(0, d // 2, device=device, dtype=torch.float32) * 2 / d)
        angle = torch.arange(seq, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.cos = torch.cat([angle.cos(), angle.cos()], -1).to(bf16)  # [S, D]
        self.sin = torch.cat([angle.sin(), angle.sin()], -1).to(bf16)

    def rope(self, x):  # x [B, H, S, D]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos + rotated * self.sin

    def forward(self, x):
        s = self.s
        B, S, h = x.shape
        d = s["head_dim"]
        for m in self.w:
            n = F.rms_norm(x, (h,), m.attn_norm, s["eps"])
            qkv = F.linear(n, m.qkv)
            q, k, v = qkv.split([self.q_dim, self.kv_dim, self.kv_dim], -1)
            q = self.rope(q.view(B, S, s["heads"], d).transpose(1, 2))
            k = self.rope(k.view(B, S, s["kv_heads"], d).transpose(1, 2))
            v = v.view(B, S, s["kv_heads"], d).transpose(1, 2)
            try:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            except TypeError:  # PyTorch < 2.5: no enable_gqa
                group = s["heads"] // s["kv_heads"]
                a = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                                   is_causal=True)
            x = x + F.linear(a.transpose(1, 2).reshape(B, S, self.q_dim), m.o)
            n = F.rms_norm(x, (h,), m.mlp_norm, s["eps"])
            gate, up = F.linear(n, m.gate_up).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, m.down)
        return x


def run_case(args, s, batch, seq):
    device = "cuda"
    torch.manual_seed(1)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = Layers(s, args.layers, seq, device)
    x = torch.randn(batch, seq, s["hidden"], device=device, dtype=torch.bfloat16, requires_grad=True)
    p = torch.randn(batch, seq, s["hidden"], device=device, dtype=torch.bfloat16)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    step, fwd, bwd = [], [], []
    for i in range(args.warmup + args.repeats):
        for param in model.parameters():
            param.grad = None
        x.grad = None
        ev[0].record()
        loss = (model(x) * p).sum()
        ev[1].record()
        loss.backward()
        ev[2].record()
        ev[2].synchronize()
        if i >= args.warmup:
            fwd.append(ev[0].elapsed_time(ev[1]))
            bwd.append(ev[1].elapsed_time(ev[2]))
            step.append(fwd[-1] + bwd[-1])
    median = statistics.median(step)
    flops = model_flops(s, args.layers, batch, seq)
    out = dict(case="train_step", model=args.model, layers=args.layers, micro_batch=batch, seq=seq,
               tokens=batch * seq, flops_per_step=flops, step_ms=median, step_ms_min=min(step),
               step_ms_max=max(step), forward_ms=statistics.median(fwd), backward_ms=statistics.median(bwd),
               samples=len(step), tokens_per_s=batch * seq / (median / 1e3), model_tflops=flops / (median / 1e3) / 1e12,
               max_memory_allocated_bytes=torch.cuda.max_memory_allocated(), loss=float(loss.detach()))
    print(json.dumps(out), flush=True)
    del model, x, p, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b", choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--micro-batch", default="1")
    ap.add_argument("--seq", default="4096")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    s = SHAPES[args.model]
    print(json.dumps(dict(case="env", torch=torch.__version__, cuda=torch.version.cuda,
                          gpu=torch.cuda.get_device_name(), sdpa="F.scaled_dot_product_attention(is_causal=True, "
                          "enable_gqa=True), backend chosen by PyTorch")), flush=True)
    for batch in [int(b) for b in args.micro_batch.split(",")]:
        for seq in [int(q) for q in args.seq.split(",")]:
            run_case(args, s, batch, seq)


if __name__ == "__main__":
    main()
