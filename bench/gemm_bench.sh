#!/usr/bin/env bash
# The Llama-3-8B / Qwen3-8B linear set (QKV 6144×4096, O 4096×4096, gate+up 28672×4096,
# down 4096×14336) in every weight format, with `onecat bench` (cuBLAS fp16 peer in the same
# run) and torch's int4 GEMM as the int4 peer. Writes one JSON per spec under $OUT (or
# ./bench-out) and prints the tables. Run on the GPU machine:
#   bench/gemm_bench.sh [path/to/onecat] [M list]
set -euo pipefail
onecat=${1:-build/onecat}
ms=${2:-1,2,4,8,16,32,64,128,256,512,2048}
out=${OUT:-bench-out}
mkdir -p "$out"
shapes=(6144x4096 4096x4096 28672x4096 4096x14336)
formats=(f16 awq4 gptq4 fp8b32 fp8b128 nvfp4 mxfp4)
for fmt in "${formats[@]}"; do
  for s in "${shapes[@]}"; do
    spec="gemm:n=${s%x*},k=${s#*x},fmt=$fmt"
    "$onecat" bench "$spec" --m "$ms" --json >"$out/gemm_${fmt}_${s}.json"
    python3 - "$out/gemm_${fmt}_${s}.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
for p in b["points"]:
    print(f"{b['spec']:60} m={p['m']:5d} {p['us']:9.2f} us {p['weight_gbps']:7.0f} GB/s {p['pct_copy']:5.1f}% "
          f"{p['tflops']:7.2f} TF/s cuBLAS {p['cublas_us']:9.2f} us x{p['speedup_vs_cublas']:.2f} err {p['error_vs_cublas']:.1e}")
PY
  done
done
python3 bench/torch_int4_peer.py --shapes "$(IFS=,; echo "${shapes[*]}")" --m "$ms" --out "$out/torch_int4.json" || echo "torch int4 peer failed"
