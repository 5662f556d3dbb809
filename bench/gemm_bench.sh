#!/usr/bin/env bash
# The Llama-3-8B / Qwen3-8B linear set (QKV 6144×4096, O 4096×4096, gate+up 28672×4096,
# down 4096×14336) in every weight format, with `onecat bench` (cuBLAS fp16 peer in the same
# run): a config sweep at the SWEEP token counts (none when empty), the default config at the
# others; then torch's int4 GEMM as the int4 peer (at the sweep's counts, else the others'). Appends one JSON object per spec and run to
# $OUT/gemm_bench.jsonl (or ./bench-out/) and prints a table. On the GPU machine:
# GRAPH=1 times batches replayed from CUDA graphs (onecat bench --graph, the peers too).
#   [FORMATS="awq4 f16"] [SHAPES="4096x4096"] [GRAPH=1] bench/gemm_bench.sh [onecat] [sweep M list] [default M list]
set -euo pipefail
onecat=${1:-build/onecat}
sweep_ms=${2-1,16}
default_ms=${3-2,4,8,32,128,512,2048}
out=${OUT:-bench-out}
mkdir -p "$out"
read -r -a shapes <<<"${SHAPES:-6144x4096 4096x4096 28672x4096 4096x14336}"
graph=(); [ -z "${GRAPH:-}" ] || graph=(--graph)
read -r -a formats <<<"${FORMATS:-f16 awq4 gptq4 fp8b32 fp8b128 nvfp4 mxfp4}"
show() { python3 "$(dirname "$0")/gemm_table.py" "$out/gemm_bench.jsonl"; }
for fmt in "${formats[@]}"; do
  for s in "${shapes[@]}"; do
    spec="gemm:n=${s%x*},k=${s#*x},fmt=$fmt"
    [ -z "$sweep_ms" ] || "$onecat" bench "$spec" --m "$sweep_ms" --sweep --json "${graph[@]}" | show
    [ -z "$default_ms" ] || "$onecat" bench "$spec" --m "$default_ms" --json "${graph[@]}" | show
  done
done
python3 "$(dirname "$0")/torch_int4_peer.py" --shapes "$(IFS=,; echo "${shapes[*]}")" --m "${sweep_ms:-$default_ms}" "${graph[@]}" \
  --out "$out/torch_int4${GRAPH:+-graph}.json" || echo "torch int4 peer failed"
