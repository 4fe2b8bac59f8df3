#!/usr/bin/env python3
"""The stronger PyTorch serving baseline that `gpuscout bench --only serve` is compared with.

A Llama-family decoder written directly in PyTorch (no Hugging Face; --model llama-3.1-8b,
mistral-7b-v0.1, or qwen2.5-7b with its QKV biases in the fused QKV F.linear): cuBLAS GEMMs through
F.linear (Q/K/V fused into one matrix, gate/up into another), F.rms_norm, RoPE from cached
cos/sin tables, F.scaled_dot_product_attention (causal flash attention for the prompt; for a
decode step, over the whole static KV cache under a position mask), greedy argmax. Random BF16
weights (speed depends on shapes, not values). Per batch: one prefill of --isl tokens per
sequence (eager), then --osl - 1 decode steps, each a replay of one CUDA graph captured once for
that batch (the graph reads the position from a device tensor, attends over the whole static cache
under a mask and writes the next token into its own input). The first output token comes from the
prefill, so a request's --osl tokens take one prefill and osl - 1 decode steps.

Decode attention comes in two forms, and every batch is timed with each (--decode-attention):
`sdpa_gqa` calls SDPA plainly (`enable_gqa=True` under the mask), `folded` folds each KV head's
query heads into the query axis so one SDPA call per KV head reads its K/V once. Which is faster
depends on the PyTorch build and the card (on H100s with PyTorch 2.11 the plain call was, at batch
1, 8 and 32); bench/serve_compare.py compares gpuscout with the faster one of each batch.

Prints JSON lines on stdout:
  {"case": "env", ...}                       torch, CUDA, GPU, model shape
  {"case": "copy", "gbps": ...}              4 GiB Tensor.copy_, bytes read + written (roofline denominator)
  {"case": "batch", "batch": B, "decode_attention": "sdpa_gqa"|"folded", "prefill_ms",
   "decode_ms_per_step", "decode_tokens_per_s", "e2e_output_tokens_per_s", "e2e_s",
   "decode_hbm_roofline_pct", ...}
  {"case": "prefill", "tokens": T, "ms", "tflops", ...}   one T-token prompt, FLOPs counted as gpuscout does
Times are medians of --repeats runs after one warm-up run (CUDA events).

  python3 bench/serve_baseline_torch.py [--model llama-3.1-8b|mistral-7b-v0.1|qwen2.5-7b] [--batches 1,8,32] [--isl 512]
                                        [--osl 128] [--prefill 8192]
                                        [--decode-attention sdpa_gqa,folded]
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

# Llama-3.1-8B (data/models/llama-3.1-8b.toml) and Qwen2.5-7B (data/models/qwen2.5-7b.toml: QKV
# biases, 7 query heads per KV head).
SHAPES = {
    "llama-3.1-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256,
                         rope_theta=500000.0, eps=1e-5, qkv_bias=False),
    "qwen2.5-7b": dict(layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128, ffn=18944, vocab=152064,
                       rope_theta=1000000.0, eps=1e-6, qkv_bias=True),
    # data/models/mistral-7b-v0.1.toml; its 4096-token sliding window is longer than any context here.
    "mistral-7b-v0.1": dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=32000,
                            rope_theta=10000.0, eps=1e-5, qkv_bias=False),
}


class Decoder:
    def __init__(self, shape, layers, max_len, device):
        self.s = shape
        self.layers = layers
        h, d = shape["hidden"], shape["head_dim"]
        self.q_dim, self.kv_dim = shape["heads"] * d, shape["kv_heads"] * d
        bf16 = torch.bfloat16
        g = torch.Generator(device=device)
        g.manual_seed(1)

        def mat(out_f, in_f):  # variance 1/in, like the engine's weights
            return (torch.randn(out_f, in_f, device=device, dtype=bf16, generator=g) / math.sqrt(in_f))

        self.embedding = torch.randn(shape["vocab"], h, device=device, dtype=bf16, generator=g)
        self.lm_head = mat(shape["vocab"], h)
        self.final_norm = torch.ones(h, device=device, dtype=bf16)
        self.w = []
        for _ in range(layers):
            self.w.append(dict(
                attn_norm=torch.ones(h, device=device, dtype=bf16),
                qkv=mat(self.q_dim + 2 * self.kv_dim, h),
                o=mat(h, self.q_dim),
                mlp_norm=torch.ones(h, device=device, dtype=bf16),
                gate_up=mat(2 * shape["ffn"], h),
                down=mat(h, shape["ffn"]),
            ))
            if shape["qkv_bias"]:
                self.w[-1]["qkv_bias"] = torch.rand(self.q_dim + 2 * self.kv_dim, device=device, dtype=bf16,
                                                    generator=g) - 0.5
        inv = 1.0 / (shape["rope_theta"] ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
        freqs = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = emb.cos().to(bf16), emb.sin().to(bf16)
        self.device = device
        self.decode_attention = "sdpa_gqa"

    def weight_bytes(self):
        t = [self.lm_head, self.final_norm] + [x for layer in self.w for x in layer.values()]
        return sum(x.numel() * x.element_size() for x in t)

    def layer_params(self):
        return sum(x.numel() for layer in self.w for x in layer.values())

    def new_cache(self, batch, length):
        shape = (batch, self.s["kv_heads"], length, self.s["head_dim"])
        return [(torch.zeros(shape, device=self.device, dtype=torch.bfloat16),
                 torch.zeros(shape, device=self.device, dtype=torch.bfloat16)) for _ in range(self.layers)]

    @staticmethod
    def rope(x, cos, sin):  # x [B, H, T, D]; cos/sin [T, D] or [B, 1, 1, D]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, tokens, cache, pos=None, mask=None):
        """tokens [B, T]. Prefill (pos None): positions 0..T-1, causal attention over the new
        tokens, K/V written to cache[:, :, :T]. Decode (T == 1): `pos` a 1-element device tensor,
        K/V written at pos, attention over the whole static cache under `mask`."""
        s = self.s
        b, t = tokens.shape
        hd, heads, kvh = s["head_dim"], s["heads"], s["kv_heads"]
        x = F.embedding(tokens, self.embedding)
        if pos is None:
            cos, sin = self.cos[:t], self.sin[:t]
        else:
            cos, sin = self.cos.index_select(0, pos), self.sin.index_select(0, pos)
        for layer, (kc, vc) in zip(self.w, cache):
            y = F.rms_norm(x, (s["hidden"],), layer["attn_norm"], s["eps"])
            qkv = F.linear(y, layer["qkv"], layer.get("qkv_bias"))
            q, k, v = qkv.split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
            q = self.rope(q.view(b, t, heads, hd).transpose(1, 2), cos, sin)
            k = self.rope(k.view(b, t, kvh, hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, kvh, hd).transpose(1, 2)
            if pos is None:
                kc[:, :, :t].copy_(k)
                vc[:, :, :t].copy_(v)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                kc.index_copy_(2, pos, k)
                vc.index_copy_(2, pos, v)
                if self.decode_attention == "folded":
                    # One query token: fold each KV head's group of query heads into the query-length
                    # axis, so attention reads every K/V once whichever kernel SDPA picks.
                    g = q.reshape(b, kvh, heads // kvh, hd)
                    a = F.scaled_dot_product_attention(g, kc, vc, attn_mask=mask).reshape(b, heads, 1, hd)
                else:
                    a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
            x = x + F.linear(a.transpose(1, 2).reshape(b, t, self.q_dim), layer["o"])
            y = F.rms_norm(x, (s["hidden"],), layer["mlp_norm"], s["eps"])
            gate, up = F.linear(y, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        last = F.rms_norm(x[:, -1], (s["hidden"],), self.final_norm, s["eps"])
        return torch.argmax(F.linear(last, self.lm_head), dim=-1)


def timed(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3, out


def copy_gbps():
    n = 4 * 2**30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    ts = [timed(lambda: b.copy_(a))[0] for _ in range(10)]
    del a, b
    return 2 * n / statistics.median(ts) / 1e9  # read + write


def run_batch(model, batch, isl, osl, repeats, cache_len):
    cache = model.new_cache(batch, cache_len)
    prompt = torch.randint(0, model.s["vocab"], (batch, isl), device="cuda")
    # Static buffers the decode graph reads and writes.
    token = torch.zeros(batch, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    steps = torch.arange(cache_len, device="cuda")

    def decode_step():
        mask = (steps <= pos).view(1, 1, 1, -1)
        token.copy_(model.forward(token, cache, pos=pos, mask=mask).view(batch, 1))

    # Capture once (after warming the kernels up on a side stream, as torch.cuda.graphs requires).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        pos.fill_(isl)
        for _ in range(2):
            decode_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode_step()

    def generate():
        start, mid, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        token.copy_(model.forward(prompt, cache).view(batch, 1))
        mid.record()
        for i in range(osl - 1):
            pos.fill_(isl + i)
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(mid) / 1e3, mid.elapsed_time(end) / 1e3, start.elapsed_time(end) / 1e3

    generate()  # warm-up
    runs = [generate() for _ in range(repeats)]
    prefill_s = statistics.median(r[0] for r in runs)
    decode_s = statistics.median(r[1] for r in runs)
    e2e_s = statistics.median(r[2] for r in runs)
    step_s = decode_s / max(1, osl - 1)
    del graph, cache
    torch.cuda.empty_cache()
    return prefill_s, step_s, e2e_s


def attention_flops(model, tokens):
    # QK^T and PV over the causal triangle: 2 matmuls x 2 FLOPs x heads x head_dim x T(T+1)/2, per layer.
    s = model.s
    return model.layers * 4.0 * s["heads"] * s["head_dim"] * tokens * (tokens + 1) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b", choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=0, help="fewer layers (smoke tests); 0: the model's")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--isl", type=int, default=512)
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--prefill", default="8192", help="prompt lengths of the prefill cases; empty: none")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-len", type=int, default=1024, help="static KV cache length of the batch cases")
    ap.add_argument("--decode-attention", default="sdpa_gqa,folded",
                    help="decode attention forms each batch is timed with: sdpa_gqa, folded (comma list)")
    args = ap.parse_args()
    if args.isl < 1 or args.osl < 1 or args.repeats < 1:
        sys.exit("--isl, --osl and --repeats must be >= 1")
    if args.isl + args.osl > args.cache_len:
        sys.exit(f"--isl + --osl ({args.isl + args.osl}) exceeds --cache-len {args.cache_len}")
    shape = SHAPES[args.model]
    layers = args.layers or shape["layers"]
    batches = [int(b) for b in args.batches.split(",") if b]
    forms = [f for f in args.decode_attention.split(",") if f]
    if not forms or any(f not in ("sdpa_gqa", "folded") for f in forms):
        sys.exit(f"--decode-attention: expected a comma list of sdpa_gqa and folded, got '{args.decode_attention}'")
    prefills = [int(t) for t in args.prefill.split(",") if t]
    torch.manual_seed(1)
    torch.backends.cuda.matmul.allow_tf32 = False

    def emit(obj):
        print(json.dumps(obj), flush=True)

    emit({"case": "env", "torch": torch.__version__, "cuda": torch.version.cuda,
          "gpu": torch.cuda.get_device_name(), "model": args.model, "layers": layers,
          "shape": shape, "isl": args.isl, "osl": args.osl, "repeats": args.repeats})
    bw = copy_gbps()
    emit({"case": "copy", "bytes": 4 * 2**30, "gbps": bw, "note": "Tensor.copy_ of 4 GiB, bytes read + written"})

    model = Decoder(shape, layers, max([args.cache_len] + prefills), "cuda")
    kv_bytes_per_token = layers * 2 * shape["kv_heads"] * shape["head_dim"] * 2
    with torch.inference_mode():
        for batch, form in ((b, f) for b in batches for f in forms):
            model.decode_attention = form
            prefill_s, step_s, e2e_s = run_batch(model, batch, args.isl, args.osl, args.repeats, args.cache_len)
            # Bytes a decode step must read: every weight but the embedding table (B rows gathered),
            # plus the KV cache it attends over (the whole static cache, as SDPA reads it; counted
            # once, the least either form can read).
            step_bytes = model.weight_bytes() + batch * args.cache_len * kv_bytes_per_token
            emit({"case": "batch", "batch": batch, "decode_attention": form,
                  "isl": args.isl, "osl": args.osl,
                  "decode_steps": args.osl - 1, "prefill_ms": prefill_s * 1e3,
                  "decode_ms_per_step": step_s * 1e3, "decode_tokens_per_s": batch / step_s,
                  "e2e_s": e2e_s, "e2e_output_tokens_per_s": batch * args.osl / e2e_s,
                  "decode_bytes_per_step": step_bytes,
                  "decode_hbm_roofline_pct": 100.0 * step_bytes / step_s / (bw * 1e9)})
        for tokens in prefills:
            cache = model.new_cache(1, tokens)
            prompt = torch.randint(0, shape["vocab"], (1, tokens), device="cuda")
            model.forward(prompt, cache)
            ts = [timed(lambda: model.forward(prompt, cache))[0] for _ in range(args.repeats)]
            t = statistics.median(ts)
            flops = 2.0 * model.layer_params() * tokens + attention_flops(model, tokens) + \
                2.0 * shape["vocab"] * shape["hidden"]
            emit({"case": "prefill", "tokens": tokens, "ms": t * 1e3, "tflops": flops / t / 1e12, "flops": flops,
                  "note": "2 x layer params x tokens + causal attention + LM head of the last token"})
            del cache
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
