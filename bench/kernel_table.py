#!/usr/bin/env python3
"""Issue 27's kernel table: reads `onecat bench --shapes FILE [--sweep] [--graph] --json` (one
JSON object per line of FILE; bench/kernel_table.sh runs it) and prints one markdown row per point: the default config's
time, the tuned one's (the sweep's best), the peer's and the ratios the issue sets targets on.

The gemm peer (cuBLAS fp16 on the dequantised weights) is in the JSON already. Attention's,
torch SDPA on contiguous fp16 K/V of the same lengths, is timed here with --sdpa (needs torch
and the GPU; attention points need ctx= for it): decode one query token, verify its q tokens
under a bottom-right causal mask, prefill one causal sequence of M tokens; timed as the
JSON's points were (CUDA graph replays when it says "graph"), inputs rotated past the L2.

Targets (issue 27): gemm tuned ≥ 1.0× cuBLAS at M = 17–128 and ≥ 0.9× at 256–4096; decode
and verify ≥ 1.0× SDPA on fp16 KV and ≥ 1.3× on fp8 KV; prefill at D = 128 ≥ 0.6×; the default
within 1.3× of the tuned best everywhere.

Usage: bench/kernel_table.py KERNELS.json [--sdpa] [--json OUT.json] > TABLE.md"""
import argparse
import json
import sys

DEFAULT_WITHIN = 1.3


def fields(spec):
    """'gemm:n=4096,k=4096,fmt=awq4' -> ('gemm', {'n': '4096', ...})."""
    family, _, rest = spec.partition(":")
    return family, dict(kv.split("=", 1) for kv in rest.split(",") if kv)


def shape_text(family, f):
    if family == "gemm":
        epi = "" if f.get("epi", "none") == "none" else f" {f['epi']}"
        return f"{f['fmt']} {f['n']}×{f['k']}{epi}"
    if family == "attention":
        q = f" q={f['q']}" if f.get("op") == "verify" else ""
        return f"{f['op']} {f['kv']} KV {f['heads']}/{f['kv_heads']} D={f['dim']} page {f['page']}{q}"
    return ",".join(f"{k}={v}" for k, v in f.items())


def target(family, f, m):
    """The speed the issue asks against the peer at this point (None: no target there)."""
    if family == "gemm":
        if 17 <= m <= 128:
            return 1.0
        if 256 <= m <= 4096:
            return 0.9
        return None
    if family == "attention":
        if f["op"] in ("decode", "verify"):
            return 1.0 if f["kv"] == "f16" else 1.3
        if f["op"] == "prefill" and f["dim"] == "128":
            return 0.6
    return None


def sdpa_us(f, m, ctx, graph):
    """torch SDPA on the point's shape, fp16 contiguous K/V; None where it has no peer."""
    import torch
    import torch.nn.functional as F

    from torch_timing import time_rotated_us

    if int(f.get("window", "0")) > 0:
        return None  # a sliding window has no SDPA fast path to set against
    heads, kvh, dim = int(f["heads"]), int(f["kv_heads"]), int(f["dim"])
    dev, half = torch.device("cuda"), torch.float16
    mask = None
    if f["op"] == "prefill":
        batch, q_len, keys = 1, m, m
    else:
        if not ctx:
            return None
        batch, q_len, keys = m, int(f.get("q", "1")) if f["op"] == "verify" else 1, ctx
        if q_len > 1:
            from torch.nn.attention.bias import causal_lower_right

            mask = causal_lower_right(q_len, keys)
    kv_bytes = 2 * batch * kvh * keys * dim * 2
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rot = max(1, min(16, -(-3 * l2 // kv_bytes)))
    ks = [torch.randn(batch, kvh, keys, dim, device=dev, dtype=half) for _ in range(rot)]
    vs = [torch.randn_like(ks[0]) for _ in range(rot)]
    q = torch.randn(batch, heads, q_len, dim, device=dev, dtype=half)
    causal = f["op"] == "prefill"

    def run(i):
        F.scaled_dot_product_attention(q, ks[i], vs[i], attn_mask=mask, is_causal=causal, enable_gqa=True)

    us = time_rotated_us(run, rot, graph)
    del ks, vs, q
    torch.cuda.empty_cache()
    return us


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", help="onecat bench --shapes ... --json output")
    ap.add_argument("--sdpa", action="store_true", help="time torch SDPA beside every attention point (GPU)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    a = ap.parse_args()
    with open(a.kernels) as fh:
        results = [json.loads(line) for line in fh if line.strip()]
    if not results:
        sys.exit(f"{a.kernels} holds no result")
    run = results[0]
    graph = run.get("timing") == "graph"
    rows = []
    for r in results:
        family, f = fields(r["spec"])
        ctx = r.get("context", 0)
        for p in r["points"]:
            m = p["m"]
            default_us = p["default_us"] or p["us"]
            peer, peer_us = r.get("peer") or "", p.get("peer_us") or 0.0
            if family == "attention" and a.sdpa:
                us = sdpa_us(f, m, ctx, graph)
                if us:
                    peer, peer_us = "SDPA", us
            speed = peer_us / p["us"] if peer_us else None
            want = target(family, f, m) if peer_us else None
            rows.append({"spec": r["spec"], "family": family, "shape": shape_text(family, f), "m": m, "ctx": ctx,
                         "default_us": default_us, "tuned_us": p["us"], "config": p["config"],
                         "default_over_tuned": default_us / p["us"], "peer": peer, "peer_us": peer_us,
                         "x_peer": speed, "target": want,
                         "met": None if want is None else speed >= want,
                         "default_met": default_us / p["us"] <= DEFAULT_WITHIN if run.get("sweep") else None})
            print(f"{rows[-1]['shape']} m={m} ctx={ctx}: {p['us']:.2f} us", file=sys.stderr, flush=True)

    def num(v, fmt="{:.2f}"):
        return "–" if v is None else fmt.format(v)

    tuned = "tuned µs" if run.get("sweep") else "µs"
    print(f"{run['device']}, {run['timing']} timing, copy {run['copy_gbps']:.0f} GB/s"
          f"{', every candidate swept' if run.get('sweep') else ', default configs only'}\n")
    print(f"| kernel | M / batch | ctx | default µs | {tuned} | default ÷ tuned | peer | peer µs | × peer | target |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in rows:
        met = "" if w["met"] is None else (" ✓" if w["met"] else " ✗")
        dflt = "" if w["default_met"] is None or w["default_met"] else " ✗"
        print(f"| {w['shape']} | {w['m']} | {w['ctx'] or '–'} | {w['default_us']:.2f} | {w['tuned_us']:.2f} | "
              f"{w['default_over_tuned']:.2f}{dflt} | {w['peer'] or '–'} | {num(w['peer_us'] or None)} | "
              f"{num(w['x_peer'])}{met} | {num(w['target'], '≥ {:.1f}')} |")
    with_target = [w for w in rows if w["met"] is not None]
    print(f"\nAgainst the peer: {sum(w['met'] for w in with_target)} of {len(with_target)} points with a target met"
          + (f"; the default within {DEFAULT_WITHIN}× of the tuned best at "
             f"{sum(bool(w['default_met']) for w in rows)} of {len(rows)}" if run.get("sweep") else "") + ".")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": run["device"], "timing": run["timing"], "sweep": run.get("sweep", False), "rows": rows},
                      fh, indent=1)


if __name__ == "__main__":
    main()
