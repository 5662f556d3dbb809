#!/usr/bin/env python3
"""The moe-bench table (bench/device.sh moe-bench -> moe_bench.jsonl): per weight format and token
count, the best swept time of each kernel of one Qwen3-30B-A3B MoE layer (route, gate_up, down,
combine), their sum, the layer's floor (the touched experts' weights and the rows at copy
bandwidth: the projections' floors plus route's and combine's), the sum's share of that floor,
and torch's layer (bench/moe_torch_peer.py, fp16 weights) with onecat's speed-up over it; then
the one-launch decode layer (op=decode) where measured: its best swept time, its floor (both
projections of the touched experts, x, out and the logits) and its share of that floor, and,
timed in the same run as op=decode (the same routings, the same stream or graph timing), the
four launches a step makes without it (route, gate_up, down, combine at their default configs)
and their share of the same floor.

Usage: bench/moe_table.py moe_bench.jsonl [--json]"""
import json, re, sys


def main():
    path = sys.argv[1]
    as_json = "--json" in sys.argv[2:]
    kernels, torch_us = {}, {}  # (op, fmt) -> {m: point}; m -> us
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        row = json.loads(line)
        if row.get("peer") == "torch":
            torch_us[row["m"]] = row["us"]
            continue
        spec = row["spec"]
        op = re.search(r"op=(\w+)", spec).group(1)
        fmt = re.search(r"fmt=(\w+)", spec)
        kernels[(op, fmt.group(1) if fmt else None)] = {p["m"]: p for p in row["points"]}
    fmts = sorted({f for (_, f) in kernels if f})
    rows = []
    for fmt in fmts:
        parts = [("route", None), ("gate_up", fmt), ("down", fmt), ("combine", None)]
        ms = sorted((set.intersection(*[set(kernels.get(k, {})) for k in parts]) if all(k in kernels for k in parts)
                     else set(kernels.get(("gate_up", fmt), {}))) | set(kernels.get(("decode", fmt), {})))
        for m in ms:
            pts = {k[0]: kernels[k][m] for k in parts if k in kernels and m in kernels[k]}
            r = {"fmt": fmt, "m": m}
            for name, p in pts.items():
                r[name + "_us"] = p["us"]
                r[name + "_config"] = p["config"]
            if len(pts) == 4:
                r["layer_us"] = sum(p["us"] for p in pts.values())
                r["floor_us"] = sum(p["bandwidth_floor_us"] for p in pts.values())
                r["pct_floor"] = 100 * r["floor_us"] / r["layer_us"]
                if m in torch_us:
                    r["torch_us"] = torch_us[m]
                    r["speedup_vs_torch"] = torch_us[m] / r["layer_us"]
            dec = kernels.get(("decode", fmt), {}).get(m)
            if dec:
                r["decode_us"], r["decode_config"] = dec["us"], dec["config"]
                r["decode_floor_us"] = dec["bandwidth_floor_us"]
                r["decode_pct_floor"] = 100 * dec["bandwidth_floor_us"] / dec["us"]
                if dec.get("peer_us", 0) > 0:
                    r["four_launches_us"] = dec["peer_us"]
                    r["four_launches_pct_floor"] = 100 * dec["bandwidth_floor_us"] / dec["peer_us"]
            for name in ("gate_up", "down"):
                if name in pts:
                    r[name + "_pct_floor"] = 100 * pts[name]["bandwidth_floor_us"] / pts[name]["us"]
            rows.append(r)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    cols = [("fmt", "{}"), ("m", "{}"), ("route_us", "{:.1f}"), ("gate_up_us", "{:.1f}"), ("down_us", "{:.1f}"),
            ("combine_us", "{:.1f}"), ("layer_us", "{:.1f}"), ("floor_us", "{:.1f}"), ("pct_floor", "{:.0f}%"),
            ("torch_us", "{:.0f}"), ("speedup_vs_torch", "{:.2f}x"), ("decode_us", "{:.1f}"),
            ("decode_floor_us", "{:.1f}"), ("decode_pct_floor", "{:.0f}%"), ("four_launches_us", "{:.1f}"),
            ("four_launches_pct_floor", "{:.0f}%")]
    print("| " + " | ".join(c for c, _ in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f.format(r[c]) if c in r else "-" for c, f in cols) + " |")


if __name__ == "__main__":
    main()
