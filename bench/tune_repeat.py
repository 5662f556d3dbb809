"""Repeatability and speedups of `onecat tune` runs (issue 4's report).

Reads JSON lines as bench/device.sh writes them to tunes.jsonl (one per tune: model, run,
rc, wall_s, summary = `onecat tune --json`, records = `onecat cache ls --tunings --json`) and
prints, per model: each run's tune time and geometric-mean tuned/default speedup per family,
then for every (spec, bucket) whose choices differ between runs 1 and 2, how much slower each
run's choice was in the other run, and how many pairs are within the tolerance (3 %).
    python3 bench/tune_repeat.py bench/data/tune-qwen3-8b-2026-11-29.jsonl.gz
With --rechoose NOISE,FLOOR_US every run's choice is made again from its recorded timings:
among the fully timed candidates within NOISE (relative) of the fastest median or FLOOR_US,
whichever is wider, the default, then the earliest in candidate order. tuner/tuner.cpp's
choose_config is this rule with 0.01,0 (FLOOR_US is for trying other bands). E.g. to compare
runs tuned before and after a change of the rule:
    python3 bench/tune_repeat.py --rechoose 0.01,0 FILES
"""

from __future__ import annotations

import argparse
import gzip
import json
import math


def load(paths: list[str]) -> dict[tuple[str, int], dict]:
    runs = {}
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as f:
            for line in f:
                d = json.loads(line)
                if d["rc"] == 0:
                    runs[(d["model"], d["run"])] = d
    return runs


def slower(times: dict[str, dict], mine: str, other: str) -> tuple[float, str]:
    """How much slower `other` was than `mine` in one run (inf when it was not timed)."""
    o = times.get(other)
    if not o or o["status"] not in ("ok", "screened"):
        return math.inf, "not timed"
    return o["median_us"] / times[mine]["median_us"] - 1, o["status"]


def choose(record: dict, noise: float, floor_us: float) -> str:
    """tuner/tuner.cpp's choose_config on one record's candidates (kept in candidate order)."""
    ok = [c for c in record["candidates"] if c["status"] == "ok"]
    best = min(c["median_us"] for c in ok)
    band = best + max(noise * best, floor_us)
    inside = [c["config"] for c in ok if c["median_us"] <= band]
    return record["default_config"] if record["default_config"] in inside else inside[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--rechoose", metavar="NOISE,FLOOR_US", help="choose again from the recorded timings")
    args = ap.parse_args()
    runs = load(args.files)
    if args.rechoose:
        noise, floor_us = map(float, args.rechoose.split(","))
        for d in runs.values():
            for r in d["records"]:
                r["config"] = choose(r, noise, floor_us)
                r["best_us"] = next(c["median_us"] for c in r["candidates"] if c["config"] == r["config"])
    for model in sorted({m for m, _ in runs}):
        print(f"## {model}")
        for run in sorted(r for m, r in runs if m == model):
            d = runs[(model, run)]
            per_family: dict[str, list[float]] = {}
            for r in d["records"]:
                per_family.setdefault(r["family"], []).append(r["default_us"] / r["best_us"])
            gm = ", ".join(f"{f} {math.exp(sum(map(math.log, v)) / len(v)):.3f}x ({len(v)})" for f, v in sorted(per_family.items()))
            print(f"run {run}: {len(d['records'])} pairs in {d['wall_s']:.0f} s, failures {d['summary'].get('failures')}; geomean {gm}")
        if (model, 1) not in runs or (model, 2) not in runs:
            continue
        a = {(r["spec"], r["bucket"]): r for r in runs[(model, 1)]["records"]}
        b = {(r["spec"], r["bucket"]): r for r in runs[(model, 2)]["records"]}
        within = same = 0
        for key in sorted(a.keys() & b.keys()):
            ra, rb = a[key], b[key]
            if ra["config"] == rb["config"]:
                within += 1
                same += 1
                continue
            ta = {c["config"]: c for c in ra["candidates"]}
            tb = {c["config"]: c for c in rb["candidates"]}
            x, sx = slower(tb, rb["config"], ra["config"])
            y, sy = slower(ta, ra["config"], rb["config"])
            ok = max(x, y) <= args.tolerance
            within += ok
            print(f"  {'ok  ' if ok else 'MISS'} {key[0]} @{key[1]}: run 1 chose {ra['config']}, run 2 {rb['config']}; "
                  f"run 1's in run 2 {x * 100:+.1f}% ({sx}), run 2's in run 1 {y * 100:+.1f}% ({sy})")
        n = len(a.keys() & b.keys())
        print(f"repeatability: {within} of {n} pairs within {args.tolerance * 100:.0f}% ({same} identical choices)\n")


if __name__ == "__main__":
    main()
