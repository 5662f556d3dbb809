#!/usr/bin/env python3
"""torch's mixture-of-experts layer on fp16 weights (the peer of moe-bench, bench/device.sh):
one Qwen3-30B-A3B layer (128 experts, top-8, hidden 2048, expert intermediate 768) at the same
token counts, written as transformers' Qwen3MoeSparseMoeBlock runs it: softmax top-k routing
with renormalisation, then for each expert with tokens an index_select of its tokens, the
[gate; up] matmul, silu·mul, the down matmul and an index_add_ of the weighted rows. The
weights are what onecat's quantised formats dequantise to, so this is the "same dequantised
weights" peer. Routing logits are random normal (uniform routing). Writes one JSON line per
token count: the layer's time and the experts' bytes it touches.

Usage: bench/moe_torch_peer.py OUT.jsonl [MS]   (MS default 1,4,16,64,256,1024,4096)"""
import json, sys

import torch
import torch.nn.functional as F

from torch_timing import time_us

EXPERTS, TOPK, HIDDEN, INTER = 128, 8, 2048, 768


def moe_layer(x, logits, w_gate_up, w_down):
    probs = F.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probs, TOPK, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
    out = torch.zeros_like(x)
    mask = F.one_hot(ids, EXPERTS).permute(2, 1, 0)  # [experts][topk][tokens]
    hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
    for e in hit.squeeze(-1).tolist():
        slot, tok = torch.where(mask[e])
        h = x[tok] @ w_gate_up[e].t()
        h = F.silu(h[:, :INTER]) * h[:, INTER:]
        y = (h @ w_down[e].t()) * weights[tok, slot, None]
        out.index_add_(0, tok, y)
    return out


def main():
    path = sys.argv[1]
    ms = [int(m) for m in (sys.argv[2] if len(sys.argv) > 2 else "1,4,16,64,256,1024,4096").split(",")]
    dev = torch.device("cuda")
    torch.manual_seed(0)
    w_gate_up = torch.randn(EXPERTS, 2 * INTER, HIDDEN, device=dev, dtype=torch.float16) * 0.02
    w_down = torch.randn(EXPERTS, HIDDEN, INTER, device=dev, dtype=torch.float16) * 0.02
    with open(path, "a") as f:
        for m in ms:
            x = torch.randn(m, HIDDEN, device=dev, dtype=torch.float16)
            logits = torch.randn(m, EXPERTS, device=dev, dtype=torch.float16)
            touched = int(torch.topk(logits.float(), TOPK, dim=-1).indices.unique().numel())
            us = time_us(lambda: moe_layer(x, logits, w_gate_up, w_down), reps=5 if m >= 1024 else 10, batch=5)
            row = {"peer": "torch", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "experts": EXPERTS, "topk": TOPK, "hidden": HIDDEN, "inter": INTER, "m": m, "us": us,
                   "touched_experts": touched, "expert_bytes_f16": touched * 3 * INTER * HIDDEN * 2}
            print(json.dumps(row), flush=True)
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
