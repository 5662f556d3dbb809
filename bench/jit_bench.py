#!/usr/bin/env python3
"""Measures the JIT: cold NVRTC compile time per kernel, cache-hit lookup and module-load
time, and whether concurrent compiles scale with threads and with worker processes.

Usage: bench/jit_bench.py [--onecat build/onecat] [--arch sm_70] [--jobs 1,2,4,8] [--out FILE]
Prints a table and writes JSON (default: $OUT/jit_bench.json when $OUT is set)."""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

SPECS = ["rmsnorm:hidden=4096,dtype=f16,residual=1", "rmsnorm:hidden=5120,dtype=f16,residual=0",
         "rmsnorm:hidden=4095,dtype=f16,residual=1"]


def onecat(binary, args, cache_dir):
    env = dict(os.environ, ONECAT_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    p = subprocess.run([binary] + args, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"onecat {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onecat", default=os.path.join(os.path.dirname(__file__), "..", "build", "onecat"))
    ap.add_argument("--arch", default="sm_70")
    ap.add_argument("--jobs", default="1,2,4,8")
    ap.add_argument("--load", action="store_true", help="also time module loads on this GPU")
    ap.add_argument("--out", default=os.path.join(os.environ["OUT"], "jit_bench.json") if os.environ.get("OUT") else None)
    a = ap.parse_args()
    base = ["compile", *SPECS, "--all-configs", "--arch", a.arch, "--json"]
    res = {"arch": a.arch, "specs": SPECS, "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()}

    with tempfile.TemporaryDirectory() as d:
        cold, _ = onecat(a.onecat, base + ["-j", "1"], d)
        times = [k["compile_ms"] for k in cold["kernels"]]
        res["kernels"] = len(times)
        res["cold_compile_ms"] = {"median": statistics.median(times), "min": min(times), "max": max(times)}
        hit, _ = onecat(a.onecat, base + ["-j", "1"] + (["--load"] if a.load else []), d)
        assert all(k["cache_hit"] for k in hit["kernels"]), "second run should hit the cache"
        res["cache_hit_lookup_ms"] = {"median": statistics.median(k["elapsed_ms"] for k in hit["kernels"])}
        if a.load:
            res["module_load_ms"] = {"median": statistics.median(k["load_ms"] for k in hit["kernels"])}

    res["scaling"] = []
    for mode in ("threads", "processes"):
        for j in [int(x) for x in a.jobs.split(",")]:
            with tempfile.TemporaryDirectory() as d:
                out, _ = onecat(a.onecat, base + ["-j", str(j), "--parallel", mode], d)
                res["scaling"].append({"mode": mode, "jobs": j, "wall_ms": out["wall_ms"],
                                       "kernels_per_s": len(out["kernels"]) / out["wall_ms"] * 1e3})
    one = {m: next(s["wall_ms"] for s in res["scaling"] if s["mode"] == m and s["jobs"] == 1) for m in ("threads", "processes")}
    for s in res["scaling"]:
        s["speedup"] = one[s["mode"]] / s["wall_ms"]

    print(f"{res['kernels']} kernels for {a.arch} on {res['cpus']} CPUs")
    print(f"cold compile: median {res['cold_compile_ms']['median']:.0f} ms (min {res['cold_compile_ms']['min']:.0f}, max {res['cold_compile_ms']['max']:.0f})")
    print(f"cache hit lookup: median {res['cache_hit_lookup_ms']['median']:.2f} ms")
    if a.load:
        print(f"module load: median {res['module_load_ms']['median']:.2f} ms")
    print(f"{'mode':10} {'jobs':>4} {'wall ms':>9} {'kernels/s':>10} {'speedup':>8}")
    for s in res["scaling"]:
        print(f"{s['mode']:10} {s['jobs']:4d} {s['wall_ms']:9.0f} {s['kernels_per_s']:10.1f} {s['speedup']:8.2f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
