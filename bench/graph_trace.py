"""Where a batch-1 decode step's time goes with CUDA graphs, kernel by kernel.

`onecat generate --profile` times each launch between CUDA events, op by op, so every kernel
carries the events' gaps and no kernel overlaps the next; with CUDA graphs and programmatic
dependent launch the step is shorter than that sum. This script records the graph-replayed step
itself through CUPTI (torch.profiler's kineto): every kernel's start and end on the GPU. A
kernel's share of the step is its end less the later of its start and the previous kernel's end
(the time the step waited on it), so the shares add up to the step; `busy` is the kernel's own
start-to-end time (with PDL it starts early and waits at its grid-dependency point, so busy
overlaps the kernel before it).

  PYTHONPATH=build-device/python python3 bench/graph_trace.py --model DIR [--prompt 1024]
      [--gen 64] [--out trace.json.gz]  → one JSON object on stdout: per kernel name (demangled,
      shortened) launches per step, share µs per step, busy µs per step; the step's mean µs; the
      kernels' names grouped into ops (gemm N×K, attention, rmsnorm, rope, ...).
Env: ONECAT_CACHE_DIR as for `onecat generate` (the tuned cache), ONECAT_PDL.
"""
import argparse
import gzip
import json
import os
import random
import re
import sys
import tempfile


def short_name(name: str) -> str:
    """`void onecat::gemv_kernel<onecat::Awq4<128>, 6144, 4096, …>(…)` → `gemv_kernel<Awq4<128>, 6144, 4096, …>`"""
    name = re.sub(r"^void\s+", "", name)
    depth, end = 0, len(name)
    for i, ch in enumerate(name):  # cut the argument list after the template's closing bracket
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            end = i
            break
    return name[:end].replace("onecat::", "")


def template_args(name: str) -> list[str]:
    """The top-level template arguments of `kernel<A<1, 2>, 3, …>`: ["A<1, 2>", "3", …]."""
    start = name.find("<")
    if start < 0:
        return []
    args, depth, begin = [], 0, start + 1
    for i in range(start + 1, len(name)):
        ch = name[i]
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif (ch == "," and depth == 0) or (ch == ">" and depth == 0):
            args.append(name[begin:i].strip())
            begin = i + 1
            if ch == ">":
                break
    return args


def op_of(name: str) -> str:
    """The op a kernel belongs to: a gemm kernel's (its first template argument a weight format,
    Fmt…) weight shape N×K from the two arguments after it, else the kernel's base name."""
    base = name.split("<")[0].split("::")[-1]
    args = template_args(name)
    if len(args) >= 3 and args[0].startswith("Fmt") and args[1].isdigit() and args[2].isdigit():
        return f"{base} {args[1]}x{args[2]}"
    return base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", type=int, default=1024)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--out", help="write the raw kernel list (name, start, end µs) here, gzipped JSON")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import onecat

    torch.cuda.init()
    model = onecat.Model(args.model, "cuda", max_batch_tokens=512, kv_cache_tokens=args.prompt + 2 * args.gen + 64)
    rng = random.Random(0)
    ids = [rng.randrange(1000, min(150000, model.vocab_size)) for _ in range(args.prompt)]
    model.generate(ids, max_tokens=8, stop_ids=[])  # load kernels, capture the decode graphs
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        tokens = model.generate(ids, max_tokens=args.gen, stop_ids=[])
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        trace = json.load(open(path))
    kernels = sorted(
        ((e["ts"], e["ts"] + e["dur"], short_name(e["name"])) for e in trace.get("traceEvents", [])
         if e.get("cat") == "kernel" and "dur" in e),
        key=lambda k: k[0])
    if not kernels:
        print(json.dumps({"error": "the trace holds no kernels (CUPTI saw none)", "tokens": len(tokens)}))
        return 1
    if args.out:
        with gzip.open(args.out, "wt") as f:
            json.dump([{"name": n, "start_us": s, "end_us": e} for s, e, n in kernels], f)

    # The decode steps: each ends with the step's last kernel, the argmax over the logits; a step
    # starts after the previous step's argmax. The prefill chunks come first and their last
    # argmax ends them; the decode steps are those after it with one gemv per weight.
    ends = [i for i, k in enumerate(kernels) if "argmax" in k[2]]
    steps = [(ends[j] + 1, ends[j + 1] + 1) for j in range(len(ends) - 1)]
    # The first decode step follows the prompt's last chunk; its graph replays from the second on.
    steps = steps[1:] if len(steps) > 2 else steps
    if not steps:
        print(json.dumps({"error": f"found {len(ends)} argmax kernels: no decode steps to measure"}))
        return 1
    per_name: dict[str, dict] = {}
    step_us, gap_us = [], []
    for a, b in steps:
        prev_end = kernels[a - 1][1]
        step_us.append(kernels[b - 1][1] - prev_end)
        for s, e, n in kernels[a:b]:
            share = e - max(s, prev_end)
            gap_us.append(max(0.0, s - prev_end))
            d = per_name.setdefault(n, {"launches": 0, "share_us": 0.0, "busy_us": 0.0})
            d["launches"] += 1
            d["share_us"] += max(0.0, share)
            d["busy_us"] += e - s
            prev_end = max(prev_end, e)
    n_steps = len(steps)
    rows = sorted(({"kernel": n, "op": op_of(n), "launches_per_step": d["launches"] / n_steps,
                    "share_us_per_step": d["share_us"] / n_steps, "busy_us_per_step": d["busy_us"] / n_steps}
                   for n, d in per_name.items()), key=lambda r: -r["share_us_per_step"])
    ops: dict[str, dict] = {}
    for r in rows:
        o = ops.setdefault(r["op"], {"op": r["op"], "launches_per_step": 0.0, "share_us_per_step": 0.0,
                                     "busy_us_per_step": 0.0})
        for k in ("launches_per_step", "share_us_per_step", "busy_us_per_step"):
            o[k] += r[k]
    print(json.dumps({
        "model": args.model, "prompt": args.prompt, "gen": args.gen, "pdl": os.environ.get("ONECAT_PDL", "1"),
        "decode_steps": n_steps, "step_us_mean": sum(step_us) / n_steps,
        "idle_gaps_us_per_step": sum(gap_us) / n_steps,
        "ops": sorted(ops.values(), key=lambda o: -o["share_us_per_step"]), "kernels": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
