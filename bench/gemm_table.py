#!/usr/bin/env python3
"""Reads one `onecat bench --json` object on stdin (any family; GB/s counts every byte a launch
must move: weights, x and y), appends it to the JSONL file named by argv[1] and prints one line
per token count."""
import json
import sys

b = json.loads(sys.stdin.read())
with open(sys.argv[1], "a") as f:
    print(json.dumps(b), file=f)
graph = " graph" if b.get("timing") == "graph" else ""
for p in b["points"]:
    default = p["default_us"] or p["us"]
    peer = f" {b['peer']} {p['peer_us']:8.2f}us x{p['speedup_vs_peer']:.2f} err {p['error_vs_peer']:.1e}" if b.get("peer") else ""
    print(f"{b['spec'][:48]:48} m={p['m']:5d} {p['us']:9.2f}us {p['gbps']:6.0f}GB/s {p['pct_copy']:5.1f}% "
          f"{p['tflops']:7.2f}TF{peer} default {default:.2f}us {p['config']}{graph}")
