#!/usr/bin/env bash
# Issue 27's kernel table in one command on a machine with a GPU (bench/device.sh's
# kernel-table@FILE step runs it on the device): `onecat bench --shapes FILE --sweep --graph
# --json` (the default and the tuned best per point, cuBLAS beside gemm), then
# bench/kernel_table.py with torch SDPA beside the attention points.
#   bash bench/kernel_table.sh FILE OUTDIR [ONECAT]
#   -> OUTDIR/kernels.jsonl (a line per line of FILE, kept as each finishes), kernel_table.json, kernel_table.md
# SWEEP=0 times the defaults only; PYTHON names the Python with torch (default python3).
set -euo pipefail
file=$1 out=$2 bin=${3:-build/onecat}
py=${PYTHON:-python3}
mkdir -p "$out"
sweep=--sweep
[ "${SWEEP:-1}" = 0 ] && sweep=
status=0
"$bin" bench --shapes "$file" $sweep --graph --json >"$out/kernels.jsonl" || status=$?
# What finished is tabled even when the run was cut short (a deadline, one bad point).
"$py" "$(dirname "$0")/kernel_table.py" "$out/kernels.jsonl" --sdpa --json "$out/kernel_table.json" >"$out/kernel_table.md"
cat "$out/kernel_table.md"
exit $status
