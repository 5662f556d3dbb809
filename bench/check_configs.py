"""`onecat check` over every candidate config of some specs that matches a pattern, at several
token counts: a kernel change checked against the CPU reference on the device without the GPU
test binaries (e.g. beside bench/before_after.sh, which builds only the CLI).

  python3 bench/check_configs.py ONECAT PATTERN M[,M...] SPEC... → one JSON line per check on
  stdout, a summary line last ({"checks": N, "failed": [...]}); exit 1 when any failed.
  PATTERN: a regular expression a config must match (e.g. "strategy=gemv,mt=[2-9]").
"""
import json
import re
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    onecat, pattern, ms, specs = sys.argv[1], re.compile(sys.argv[2]), [int(m) for m in sys.argv[3].split(",")], sys.argv[4:]
    checks, failed = 0, []
    for spec in specs:
        out = subprocess.run([onecat, "compile", "--all-configs", "--json", spec], capture_output=True, text=True)
        if out.returncode != 0:
            failed.append({"spec": spec, "error": out.stderr.strip()[-300:]})
            continue
        configs = [k["config"] for k in json.loads(out.stdout)["kernels"] if pattern.search(k["config"])]
        for config in configs:
            for m in ms:
                r = subprocess.run([onecat, "check", spec, "--config", config, "--rows", str(m), "--json"],
                                   capture_output=True, text=True)
                checks += 1
                line = {"spec": spec, "config": config, "m": m, "rc": r.returncode}
                try:
                    line.update(json.loads(r.stdout))
                except json.JSONDecodeError:
                    line["error"] = (r.stderr or r.stdout).strip()[-300:]
                print(json.dumps(line), flush=True)
                if r.returncode != 0:
                    failed.append({"spec": spec, "config": config, "m": m})
    print(json.dumps({"checks": checks, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
