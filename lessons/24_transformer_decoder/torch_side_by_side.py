#!/usr/bin/env python3
"""Lesson 24 of the course (the transformer decoder) beside the same model in PyTorch.

The same Llama-style decoder as --model=1b (d_model 2048, 16 layers, 32 query and 8 KV heads of
64, MLP 8192, vocabulary 32000, bf16 weights drawn at random), written in plain PyTorch: prefill of
a 512-token prompt, then batch-1 decode over a preallocated KV cache, eager and replayed as a CUDA
graph. With --lesson=PATH it first runs the lesson's executable at its default size on the same
GPU and puts its numbers in the same table. Needs PyTorch with CUDA; the lesson does not.

    python3 lessons/24_transformer_decoder/torch_side_by_side.py --lesson=build/bin/transformer_decoder \
        --json=side_by_side.json

Times are medians of CUDA-event timings after a warm-up, as the lesson takes them. Decode is the
time of one step (the mean over a loop of steps); tokens/s is its inverse at batch 1.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from torch_timing import median_ms  # noqa: E402

D, LAYERS, HEADS, KV_HEADS, HD, MLP, VOCAB = 2048, 16, 32, 8, 64, 8192, 32000
ROPE_BASE, EPS = 10000.0, 1e-5


class Model:
    """Weights [K][N] (x @ W), as the lesson keeps them; scaled so activations stay O(1)."""

    def __init__(self, ctx, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)

        def w(k, n):
            return (torch.rand(k, n, device="cuda", generator=g) * 2 - 1).mul_(math.sqrt(3.0 / k)).bfloat16()

        self.embed = torch.randn(VOCAB, D, device="cuda", generator=g).bfloat16()
        self.layers = []
        for _ in range(LAYERS):
            self.layers.append({
                "attn_norm": torch.ones(D, device="cuda", dtype=torch.bfloat16),
                "qkv": w(D, (HEADS + 2 * KV_HEADS) * HD), "wo": w(D, D),
                "mlp_norm": torch.ones(D, device="cuda", dtype=torch.bfloat16),
                "gate_up": w(D, 2 * MLP), "down": w(MLP, D),
            })
        self.final_norm = torch.ones(D, device="cuda", dtype=torch.bfloat16)
        self.lm_head = w(D, VOCAB)
        # The cache: [layer][K or V] of [1, kv_heads, ctx, hd]; rotary tables for every position.
        self.k = [torch.zeros(1, KV_HEADS, ctx, HD, device="cuda", dtype=torch.bfloat16) for _ in range(LAYERS)]
        self.v = [torch.zeros_like(t) for t in self.k]
        inv = ROPE_BASE ** (-torch.arange(0, HD // 2, device="cuda", dtype=torch.float32) * 2 / HD)
        ang = torch.arange(ctx, device="cuda", dtype=torch.float32)[:, None] * inv[None, :]
        self.cos, self.sin = ang.cos(), ang.sin()
        self.ctx = ctx

    @staticmethod
    def norm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).bfloat16() * w

    def rope(self, x, pos):  # x [1, h, T, hd], pos [T] ("rotate half", as the lesson)
        c, s = self.cos[pos][None, None], self.sin[pos][None, None]
        x0, x1 = x[..., : HD // 2].float(), x[..., HD // 2:].float()
        return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1).bfloat16()

    def forward(self, tokens, pos, mask):
        """tokens [T], pos [T] (long, on the GPU), mask [T, ctx] additive: the logits of the last row.
        mask None: a prompt from position 0, causal over its own T keys (SDPA's flash/cuDNN path)."""
        T = tokens.shape[0]
        x = self.embed[tokens]
        for l, L in enumerate(self.layers):
            qkv = self.norm(x, L["attn_norm"]) @ L["qkv"]
            q = qkv[:, : HEADS * HD].view(T, HEADS, HD).transpose(0, 1)[None]
            k = qkv[:, HEADS * HD: (HEADS + KV_HEADS) * HD].view(T, KV_HEADS, HD).transpose(0, 1)[None]
            v = qkv[:, (HEADS + KV_HEADS) * HD:].view(T, KV_HEADS, HD).transpose(0, 1)[None]
            q, k = self.rope(q, pos), self.rope(k, pos)
            self.k[l].index_copy_(2, pos, k)
            self.v[l].index_copy_(2, pos, v)
            if mask is None:
                o = F.scaled_dot_product_attention(q, self.k[l][:, :, :T], self.v[l][:, :, :T], is_causal=True,
                                                   enable_gqa=True)
            else:
                o = F.scaled_dot_product_attention(q, self.k[l], self.v[l], attn_mask=mask[None, None],
                                                   enable_gqa=True)
            x = x + o[0].transpose(0, 1).reshape(T, D) @ L["wo"]
            gu = self.norm(x, L["mlp_norm"]) @ L["gate_up"]
            x = x + (F.silu(gu[:, :MLP]) * gu[:, MLP:]) @ L["down"]
        return self.norm(x[-1:], self.final_norm) @ self.lm_head


def mask_for(pos, ctx):
    """Additive causal mask over the whole cache: row t sees keys 0..pos[t]."""
    keys = torch.arange(ctx, device="cuda")
    return torch.where(keys[None, :] <= pos[:, None], 0.0, float("-inf")).to(torch.bfloat16)


def lesson_numbers(path):
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "24.json")
        r = subprocess.run([path, "--json=" + js], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("torch_side_by_side: the lesson exited %d:\n%s" % (r.returncode, r.stdout[-2000:]))
        rep = json.load(open(js))
    v = {x["name"]: x for x in rep["variants"]}
    pre = next(x for n, x in v.items() if n.startswith("prefill "))
    out = {"prefill ms": pre["ms"], "decode step, CUDA graph": v["decode step, CUDA graph"]["ms"],
           "decode step, stream launches": v["decode step, stream launches"]["ms"]}
    if "decode step, CUDA graph, no overlap" in v:
        out["decode step, CUDA graph, no overlap"] = v["decode step, CUDA graph, no overlap"]["ms"]
    return out, rep["config"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lesson", help="the lesson's executable, run first at its default size")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", help="write the table's numbers here too")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_side_by_side: SKIP: PyTorch sees no CUDA GPU")
        return 77

    rows = {}
    config = None
    if a.lesson:
        rows["lesson 24"], config = lesson_numbers(a.lesson)

    ctx = a.prompt + a.tokens
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    with torch.inference_mode():
        m = Model(ctx, seed=2026)
        prompt = torch.randint(0, VOCAB, (a.prompt,), device="cuda")
        ppos = torch.arange(a.prompt, device="cuda")
        prefill_ms = median_ms(lambda: m.forward(prompt, ppos, None), a.reps)

        # Decode: the position and token live in tensors, so one captured graph serves every step.
        token = torch.zeros(1, dtype=torch.long, device="cuda")
        pos = torch.zeros(1, dtype=torch.long, device="cuda")

        def step():
            logits = m.forward(token, pos, mask_for(pos, ctx))
            token.copy_(logits.argmax(-1))
            pos.add_(1)

        def loop(fn):
            pos.fill_(a.prompt)
            for _ in range(a.tokens - 1):
                fn()

        eager_ms = median_ms(lambda: loop(step), max(3, a.reps // 3)) / (a.tokens - 1)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture wants
            for _ in range(3):
                pos.fill_(a.prompt)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        pos.fill_(a.prompt)
        with torch.cuda.graph(graph):
            step()
        graph_ms = median_ms(lambda: loop(graph.replay), a.reps) / (a.tokens - 1)

        # Prefill captured too: eager prefill at this size is mostly the host launching kernels.
        with torch.cuda.stream(side):
            for _ in range(3):
                m.forward(prompt, ppos, None)
        torch.cuda.current_stream().wait_stream(side)
        pgraph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(pgraph):
            m.forward(prompt, ppos, None)
        prefill_graph_ms = median_ms(pgraph.replay, a.reps)

    rows["PyTorch eager"] = {"prefill ms": prefill_ms, "decode step, stream launches": eager_ms}
    rows["PyTorch, CUDA graph"] = {"prefill ms": prefill_graph_ms, "decode step, CUDA graph": graph_ms}
    dev = torch.cuda.get_device_name()
    when = datetime.date.today().isoformat()
    print("%s, %s, PyTorch %s, prompt %d, %d decode steps, batch 1" % (dev, when, torch.__version__, a.prompt, a.tokens))
    print("| | prefill %d tokens (ms) | decode step, stream launches (ms) | decode step, CUDA graph (ms) | tokens/s (graph) |" % a.prompt)
    print("|---|---:|---:|---:|---:|")
    for name, r in rows.items():
        g = r.get("decode step, CUDA graph")
        cells = [r.get("prefill ms"), r.get("decode step, stream launches"), g]
        print("| %s | %s | %s |" % (name, " | ".join("%.3f" % c if c else "" for c in cells), "%.0f" % (1e3 / g) if g else ""))
    if a.json:
        json.dump({"device": dev, "date": when, "torch": torch.__version__, "prompt": a.prompt, "tokens": a.tokens,
                   "lesson_config": config, "rows": rows}, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
