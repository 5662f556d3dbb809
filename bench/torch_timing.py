"""CUDA-event timing shared by the torch peers of the benchmarks (attention_sdpa.py,
moe_torch_peer.py): the median over `reps` rounds of `batch` back-to-back calls, after three
warm-up calls."""
import statistics

import torch


def time_us(fn, reps=20, batch=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        s.record()
        for _ in range(batch):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / batch)
    return statistics.median(out)
