#!/usr/bin/env python3
"""Instruction counts of a kernel's SASS (cuobjdump -sass output): the whole kernel, each loop
(a backward branch and what lies between its target and it) with its opcode mix, and the
registers and spills ptxas reported when given.

    bench/sass_stats.py KERNEL.sass [--ptxas-log LOG] [--json]
"""
import argparse
import collections
import json
import re
import sys


def parse(text):
    """[(address, opcode, text)] of every instruction."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if not m:
            continue
        body = m.group(2).strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", body).split()[0]  # without the predicate
        out.append((int(m.group(1), 16), op, body))
    return out


def mix(ops, top=12):
    c = collections.Counter(op.split(".")[0] for op in ops)
    return dict(c.most_common(top))


def stats(ins):
    loops = []
    for addr, op, body in ins:
        m = re.search(r"0x([0-9a-f]+)", body) if op.startswith("BRA") else None
        if m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            ops = [o for a, o, _ in ins if lo <= a <= addr]
            loops.append({"from": hex(lo), "to": hex(addr), "instructions": len(ops), "mix": mix(ops)})
    return {"instructions": len(ins), "loops": loops, "mix": mix([o for _, o, _ in ins], 20)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("--ptxas-log", help="ptxas -v output: registers and spills join the figures")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    ins = parse(open(a.sass).read())
    if not ins:
        sys.exit(f"{a.sass}: no SASS instructions found")
    s = stats(ins)
    if a.ptxas_log:
        log = open(a.ptxas_log).read()
        r = re.search(r"Used (\d+) registers", log)
        sp = re.search(r"(\d+) bytes spill stores", log)
        s["registers"] = int(r.group(1)) if r else None
        s["spill_store_bytes"] = int(sp.group(1)) if sp else None
    if a.json:
        print(json.dumps(s))
        return
    if "registers" in s:
        print(f"registers {s['registers']}, spill stores {s['spill_store_bytes']} bytes")
    print(f"instructions {s['instructions']}: " + ", ".join(f"{k} {v}" for k, v in s["mix"].items()))
    for lp in s["loops"]:
        print(f"loop {lp['from']}-{lp['to']}: {lp['instructions']} instructions: "
              + ", ".join(f"{k} {v}" for k, v in lp["mix"].items()))


if __name__ == "__main__":
    main()
