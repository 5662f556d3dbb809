#!/usr/bin/env python3
"""torch's int4 weight-only GEMM (_weight_int4pack_mm, group 128, bf16 activations) on the
gemm benchmark shapes: the peer for onecat's awq4/gptq4 kernels. Writes JSON.

Usage: bench/torch_int4_peer.py --shapes 6144x4096,4096x4096 --m 1,16 [--graph] [--out FILE]"""
import argparse, json, os

import torch

from torch_timing import time_rotated_us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="6144x4096,4096x4096,28672x4096,4096x14336")
    ap.add_argument("--m", default="1,16")
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--graph", action="store_true", help="time batches replayed from a CUDA graph")
    ap.add_argument("--out", default=os.path.join(os.environ["OUT"], "torch_int4.json") if os.environ.get("OUT") else None)
    a = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "group": a.group,
           "timing": "graph" if a.graph else "stream", "points": []}
    for shape in a.shapes.split(","):
        n, k = map(int, shape.split("x"))
        wbytes = n * k // 2 + (k // a.group) * n * 4
        rot = max(1, min(64, -(-3 * l2 // wbytes)))
        packed, sz = [], []
        for _ in range(rot):
            q = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
            q8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
            packed.append(torch._convert_weight_to_int4pack(q8, 8))
            sz.append(torch.rand(k // a.group, n, 2, dtype=torch.bfloat16, device="cuda") * 0.01)
        for m in map(int, a.m.split(",")):
            x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
            us = time_rotated_us(lambda i: torch._weight_int4pack_mm(x, packed[i], a.group, sz[i]), rot, a.graph)
            res["points"].append({"n": n, "k": k, "m": m, "us": us, "weight_gbps": wbytes / us / 1e3})
            print(f"torch int4 {n}x{k} m={m}: {us:.2f} us, {wbytes / us / 1e3:.0f} GB/s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
