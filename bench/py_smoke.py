"""Diagnoses a crash of the Python package on a GPU machine, one step at a time.

Each case runs in its own interpreter (a crash ends only that case) with faulthandler and
ONECAT_CRASH_BACKTRACE on, prints each step before it runs, the NVRTC/CUDA libraries the
process has mapped, and resolves the crashing thread's native frames with addr2line.
    PYTHONPATH=build-device/python python3 bench/py_smoke.py [OUT_JSON]   (bench/device.sh step pysmoke)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

CASE = r"""
import os, sys
def say(*a):
    print("STEP", *a, flush=True)
def maps():
    libs = set()
    for line in open("/proc/self/maps"):
        p = line.split()[-1]
        if any(k in p for k in ("nvrtc", "libcuda", "sqlite", "cudart")):
            libs.add(p)
    say("mapped", sorted(libs))
torch_first = os.environ.get("SMOKE_TORCH_FIRST") == "1"
if torch_first:
    say("import torch"); import torch; torch.zeros(1).cuda(); maps()
say("import onecat"); import onecat
say("info"); info = onecat.info(); print(info.get("nvrtc", info), flush=True)
say("compile sm_90"); k = onecat.compile("rmsnorm:hidden=4096,dtype=f16,residual=0", arch="sm_90"); maps()
say("compile sm_70")
try:
    onecat.compile("rmsnorm:hidden=4096,dtype=f16,residual=0", arch="sm_70")
except RuntimeError as e:
    say("sm_70 compile refused:", str(e)[:300])
if not torch_first:
    say("import torch"); import torch
x = torch.randn(7, 4096, dtype=torch.float16, device="cuda")
w = torch.randn(4096, dtype=torch.float16, device="cuda")
say("rmsnorm"); y = onecat.rmsnorm(x, w, 1e-6); torch.cuda.synchronize()
ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float())
say("rmsnorm err", float((y.float() - ref).abs().max()))
say("prepare 8 gemm kernels")
onecat.prepare(["gemm:n=4096,k=4096,fmt=awq4", "gemm:n=2048,k=4096,fmt=fp8b128"], [1, 2, 16, 512], jobs=16)
maps()
say("done")
"""


def run_case(name: str, env: dict[str, str]) -> dict:
    e = dict(os.environ, PYTHONFAULTHANDLER="1", ONECAT_CRASH_BACKTRACE="1", PYTHONUNBUFFERED="1", **env)
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CASE], env=e, capture_output=True, text=True,
                       timeout=300)
    text = p.stdout + p.stderr
    frames = []
    for m in re.finditer(r"(\S+\.so[.\d]*|\S+/python3[.\d]*)\(([^)]*)\)\s*\[0x[0-9a-f]+\]", text):
        lib, where = m.group(1), m.group(2)
        off = re.search(r"\+(0x[0-9a-f]+)", where)
        line = ""
        if off and os.path.exists(lib):
            r = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", lib, off.group(1)], capture_output=True, text=True)
            line = r.stdout.strip().replace("\n", " | ")
        frames.append(f"{lib}({where}) {line}")
    result = {"case": name, "env": env, "rc": p.returncode, "output": text[-6000:], "frames": frames}
    print(f"== {name}: rc {p.returncode}", flush=True)
    print(text[-3000:], flush=True)
    for f in frames:
        print("   ", f, flush=True)
    return result


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else ""
    system = "/usr/local/cuda/lib64/libnvrtc.so.13"
    cases = [
        ("default", {}),
        ("torch first", {"SMOKE_TORCH_FIRST": "1"}),
        ("system NVRTC", {"ONECAT_NVRTC": system}),
        ("system NVRTC, torch first", {"ONECAT_NVRTC": system, "SMOKE_TORCH_FIRST": "1"}),
    ]
    results = [run_case(n, e) for n, e in cases]
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
