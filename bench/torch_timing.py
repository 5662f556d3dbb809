"""CUDA-event timing shared by the torch peers of the benchmarks (attention_sdpa.py,
moe_torch_peer.py, torch_int4_peer.py, kernel_table.py)."""
import statistics

import torch


def time_us(fn, reps=20, batch=10):
    """The median over `reps` rounds of `batch` back-to-back calls, after three warm-up calls."""
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


def time_rotated_us(fn, rotations, graph=False, batch=20, reps=30):
    """Median µs per call of fn(i) (i cycling through `rotations` input copies) over reps
    batches of `batch` calls, each batch queued behind a sleep kernel so the GPU, not Python's
    launch rate, is timed (as onecat's measure() does); with graph=True each batch is one
    replay of a CUDA graph of the batch (onecat bench --graph)."""
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
