"""Host time per eager Python call of onecat's gemm and decode attention, against torch's matmul
and SDPA on the same shapes: the Python half of the host-overhead benchmark (bench/host_overhead.cpp
is the C++ half; issue 24 item 3, target ≤ 10 µs per onecat call).

The GPU is kept busy (torch.cuda._sleep) while a round of calls is queued, so each round times only
the host's work: argument checks, dispatch and cuLaunchKernel. The median over rounds is reported.
Each onecat op is also captured into a CUDA graph and replayed once, to show the path captures.
Needs a GPU, torch with CUDA and the onecat package (PYTHONPATH=<build>/python works).

    python bench/python_host_overhead.py [out.json]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time

import torch

import onecat

CALLS = 200  # per round, all queued behind one sleep kernel
ROUNDS = 30
SLEEP_CYCLES = 40_000_000  # ~20 ms at 2 GHz: longer than any round's queueing


def host_us_per_call(fn) -> float:
    per_call = []
    for r in range(ROUNDS):
        torch.cuda._sleep(SLEEP_CYCLES)
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        elapsed = time.perf_counter() - start
        torch.cuda.synchronize()
        if r > 2:  # the first rounds warm caches up (and resolve each bucket's kernel)
            per_call.append(elapsed / CALLS * 1e6)
    return statistics.median(per_call)


def captures(fn) -> bool:
    """Whether fn can be captured into a CUDA graph and replayed (on a side stream, as torch requires)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    return True


def row(name: str, ours, peer_name: str, peer) -> dict:
    ours_us = host_us_per_call(ours)
    peer_us = host_us_per_call(peer)
    result = {
        "op": name,
        "onecat_host_us": ours_us,
        "peer": peer_name,
        "peer_host_us": peer_us,
        "ratio_vs_peer": ours_us / peer_us,
        "graph_capture": captures(ours),
    }
    print(f"{name:44} onecat {ours_us:6.2f} us/call, {peer_name} {peer_us:6.2f} us/call ({ours_us / peer_us:.2f}x)")
    return result


def main() -> int:
    if not torch.cuda.is_available() or not onecat.gpu_available():
        print("python_host_overhead: needs a GPU, torch with CUDA and onecat", file=sys.stderr)
        return 1
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    results = []

    # gemm f16 4096x4096 at 1 and 16 tokens; the peer is torch's matmul into a given output.
    n = k = 4096
    w = torch.randn(n, k, dtype=torch.float16) * 0.02
    packed = onecat.pack_weight("f16", weight=w, device=0)
    wt = w.to(dev).t()
    for m in (1, 16):
        x = torch.randn(m, k, dtype=torch.float16, device=dev)
        y = torch.empty(m, n, dtype=torch.float16, device=dev)
        y_peer = torch.empty_like(y)
        results.append(row(f"gemm f16 4096x4096, {m} tokens, out=", lambda: onecat.gemm(x, packed, out=y),
                           "torch.matmul(out=)", lambda: torch.matmul(x, wt, out=y_peer)))
        results.append(row(f"gemm f16 4096x4096, {m} tokens, allocating", lambda: onecat.gemm(x, packed),
                           "torch.matmul", lambda: torch.matmul(x, wt)))

    # Decode over 8 sequences of 4096 keys (pages of 16), 32 query / 8 KV heads of 128; the peer
    # is torch SDPA over the same keys laid out contiguously (GQA expanded), one query per sequence.
    batch, ctx, heads, kv_heads, dim, page = 8, 4096, 32, 8, 128, 16
    pages_per_seq = ctx // page
    kc = torch.randn(batch * pages_per_seq, kv_heads, page, dim, dtype=torch.float16, device=dev)
    vc = torch.randn_like(kc)
    table = torch.arange(batch * pages_per_seq, dtype=torch.int32, device=dev).reshape(batch, pages_per_seq)
    lens = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
    q = torch.randn(batch, heads, dim, dtype=torch.float16, device=dev)
    out = torch.empty_like(q)
    spec = onecat.attention.attention_spec("decode", heads=heads, kv_heads=kv_heads, dim=dim, page=page)
    ws = onecat.attention.workspace(spec, batch, like=q)
    decode = lambda: onecat.attention.decode(q, kc, vc, table, lens, workspace=ws, out=out)
    qs = q.unsqueeze(2)  # [batch, heads, 1, dim]
    ks = torch.randn(batch, heads, ctx, dim, dtype=torch.float16, device=dev)
    vs = torch.randn_like(ks)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, scale=1 / math.sqrt(dim))
    results.append(row("decode attention f16 KV, 8 x 4096 keys", decode, "torch SDPA", sdpa))

    # Where an eager call's host time goes: reading one tensor argument (onecat._C.shape_of, the
    # same reader every op uses), the C++ op called directly (arguments checked, kernel chosen,
    # launched) and the Python wrapper around it (the difference to the full call).
    stream = torch.cuda.current_stream().cuda_stream
    direct = lambda: onecat._C.attention("decode", out, q, kc, vc, table, lens, None, None, None, ws.partial,
                                         ws.counters, "", True, 0, 0, 1 / math.sqrt(dim), stream, "", "")
    breakdown = {
        "read_one_tensor_us": host_us_per_call(lambda: onecat._C.shape_of(q, "bench", "q")),
        "decode_cpp_direct_us": host_us_per_call(direct),
        "decode_full_us": host_us_per_call(decode),
        "empty_python_call_us": host_us_per_call(lambda: None),
    }
    print("breakdown:", ", ".join(f"{k} {v:.2f}" for k, v in breakdown.items()))

    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "results": results,
                       "breakdown": breakdown}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
