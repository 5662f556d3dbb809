#!/usr/bin/env python3
"""torch scaled_dot_product_attention on the attention benchmark's shapes (the peer of
bench/attention_bench.cpp, same device call): prefill causal TFLOP/s and decode (one query
token, KV contiguous [batch, kv_heads, ctx, dim], GQA) KV bytes per second. Writes JSON.

Usage: bench/attention_sdpa.py OUT.json [quick]"""
import json, sys

import torch
import torch.nn.functional as F

from torch_timing import time_us


def main():
    path = sys.argv[1]
    quick = len(sys.argv) > 2 and sys.argv[2] == "quick"
    dev = torch.device("cuda")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "prefill": [], "decode": []}
    for heads, kvh, dim in ((32, 8, 128), (24, 4, 256)):
        for seq in (4096, 16384):
            q = torch.randn(1, heads, seq, dim, device=dev, dtype=torch.float16)
            k = torch.randn(1, kvh, seq, dim, device=dev, dtype=torch.float16)
            v = torch.randn_like(k)
            us = time_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), reps=5, batch=3)
            flop = 4.0 * heads * dim * seq * (seq + 1) / 2
            res["prefill"].append({"heads": heads, "kv_heads": kvh, "dim": dim, "seq": seq, "us": us, "tflops": flop / us / 1e6})
            print(f"sdpa prefill H={heads}/{kvh} D={dim} S={seq}: {us:.1f} us, {flop / us / 1e6:.1f} TFLOP/s", flush=True)
            del q, k, v
    for batch in (1, 8, 32):
        for ctx in ((8192,) if quick else (1024, 8192, 32768)):
            # Copies so the L2 (50 MB on an H200) never serves a repeat.
            kvbytes = batch * 8 * ctx * 128 * 2 * 2
            copies = max(1, min(16, -(-3 * 60 * 2**20 // kvbytes)))
            ks = [torch.randn(batch, 8, ctx, 128, device=dev, dtype=torch.float16) for _ in range(copies)]
            vs = [torch.randn_like(ks[0]) for _ in range(copies)]
            q = torch.randn(batch, 32, 1, 128, device=dev, dtype=torch.float16)
            it = [0]

            def run():
                i = it[0] % copies
                it[0] += 1
                F.scaled_dot_product_attention(q, ks[i], vs[i], enable_gqa=True)

            us = time_us(run)
            res["decode"].append({"batch": batch, "ctx": ctx, "us": us, "kv_gbps": kvbytes / us / 1e3})
            print(f"sdpa decode batch={batch} ctx={ctx}: {us:.1f} us, {kvbytes / us / 1e3:.0f} GB/s", flush=True)
            del ks, vs
    with open(path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
