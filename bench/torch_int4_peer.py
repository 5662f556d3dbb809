#!/usr/bin/env python3
"""torch's int4 weight-only GEMM (_weight_int4pack_mm, group 128, bf16 activations) on the
gemm benchmark shapes: the peer for onecat's awq4/gptq4 kernels. Writes JSON.

Usage: bench/torch_int4_peer.py --shapes 6144x4096,4096x4096 --m 1,16 [--graph] [--out FILE]"""
import argparse, json, os, statistics

import torch


def time_us(fn, rotations, graph=False, batch=20, reps=30):
    """Median µs per call over reps batches of `batch` calls, each batch queued behind a
    sleep kernel so the GPU, not Python's launch rate, is timed (as onecat's measure() does);
    with graph=True each batch is one replay of a CUDA graph of the batch (onecat bench --graph)."""
    for i in range(5):
        fn(i % rotations)
    torch.cuda.synchronize()
    run_batch = None
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up on the side stream, as torch asks before a capture
            for i in range(3):
                fn(i % rotations)
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(batch):
                fn(i % rotations)
        run_batch = g.replay
    else:
        state = {"i": 0}

        def run_batch():
            for _ in range(batch):
                fn(state["i"] % rotations)
                state["i"] += 1
    run_batch()
    torch.cuda.synchronize()
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        torch.cuda._sleep(2_000_000)  # ~1 ms of clock cycles: the batch is queued before it runs
        start.record()
        run_batch()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / batch)
    return statistics.median(times)


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
            us = time_us(lambda i: torch._weight_int4pack_mm(x, packed[i], a.group, sz[i]), rot, a.graph)
            res["points"].append({"n": n, "k": k, "m": m, "us": us, "weight_gbps": wbytes / us / 1e3})
            print(f"torch int4 {n}x{k} m={m}: {us:.2f} us, {wbytes / us / 1e3:.0f} GB/s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
