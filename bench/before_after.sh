#!/usr/bin/env bash
# Before/after speed of a change in one device call. Builds onecat and attention_bench from
# this tree ("after") and from a second source tree ("before": the pre-change commit), then
# times the same points on both builds in alternating order (before, after, after, before, …):
# the attention points of bench/points/before-after.txt (attention_bench points) and gemm at
# the default config of each M (onecat bench). Writes $OUT/before_after.json: per point the
# runs of each build, their medians and after / before, and the same for the point's peer as
# onecat bench times it beside (gemm: cuBLAS fp16; moe op=decode: the layer's four launches at
# their defaults, which change with the build too).
#   here:   bash bench/before_after.sh prepare REV   (REV's tree into .before/, ignored by git;
#           REV: the last commit before the change)
#   device: bash bench/before_after.sh               (run tool carry: .device .before)
# Environment: BEFORE (the before tree, default .before), POINTS (attention points file; none:
# no attention),
# GEMM_SPECS (space separated; SPEC@CONFIG times that config instead of the default; moe specs
# too), GEMM_MS (default 1,16,128,512), GEMM_GRAPH=1 (onecat bench --graph: launches replayed from
# a CUDA graph, cuBLAS's too, as issue 27's table times them), ROUNDS (runs per build and
# kind, default 2), DEADLINE (seconds from the start, default 560), BUILD_ONLY=1 (build both
# trees and stop: all that runs without a GPU), MODEL_AB=FORMAT (also the batch-1 decode of a
# random-code Qwen3-8B-shape checkpoint in FORMAT, `onecat generate --device cuda`, 1024-token
# prompt, 256 new tokens, CUDA graphs, default configs: µs per decoded token; SHAPE, LAYERS as in
# bench/model_bench.sh), AFTER_BUILD=DIR (a build of this tree that already has `onecat`, e.g.
# build-device after bench/device.sh in the same call: used as "after" instead of building it).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${1:-}" = prepare ]; then
  # Both builds time with this tree's driver (attention_bench.cpp: its `points` mode), so REV
  # may predate it; the kernels, their codegen and onecat bench are REV's own.
  rev=${2:?usage: bench/before_after.sh prepare REV}
  rm -rf "$root/.before" && mkdir -p "$root/.before" &&
    git -C "$root" archive "$rev" | tar -x -C "$root/.before" &&
    cp "$root/bench/attention_bench.cpp" "$root/.before/bench/attention_bench.cpp" &&
    git -C "$root" rev-parse "$rev" >"$root/.before/REVISION" &&
    echo "before tree: $(cat "$root/.before/REVISION") in $root/.before"
  exit $?
fi
out=${OUT:-$root/device-out}
before=$(cd "${BEFORE:-$root/.before}" && pwd) || { echo "no before tree (bash bench/before_after.sh prepare REV)"; exit 1; }
points=${POINTS:-$root/bench/points/before-after.txt}
read -r -a gemm_specs <<<"${GEMM_SPECS:-gemm:n=28672,k=4096,fmt=awq4 gemm:n=4096,k=14336,fmt=awq4}"
gemm_ms=${GEMM_MS:-1,16,128,512}
rounds=${ROUNDS:-2}
mkdir -p "$out"
start=$(date +%s)
deadline=$((start + ${DEADLINE:-560}))
left() { echo $((deadline - $(date +%s))); }
log() { echo "[$(date +%T)] $*" | tee -a "$out/before_after.log"; }

# The device image lacks SQLite's, PCRE2's and utf8proc's headers and static libraries:
# .device carries them (bench/device.sh). Elsewhere the system's are found.
deps=()
if [ -f "$root/.device/sqlite3.h" ]; then
  lib=$(ldconfig -p 2>/dev/null | awk '/libsqlite3\.so\.0 .*x86-64/ {print $NF; exit}')
  deps=(-DSQLite3_INCLUDE_DIR="$root/.device" -DSQLite3_LIBRARY="${lib:-$root/.device/libsqlite3.a}"
        -DPCRE2_INCLUDE_DIR="$root/.device" -DPCRE2_LIBRARY="$root/.device/libpcre2-8.a"
        -DUTF8PROC_INCLUDE_DIR="$root/.device" -DUTF8PROC_LIBRARY="$root/.device/libutf8proc.a")
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Both trees are built the same way, the NVRTC search path (ONECAT_PROJECT_VENV) included, into
# build-ba-after/ and build-ba-before/ here: ignored, and outside the carried .before, so a warm
# device keeps both builds for a second call (a call that ran out of time resumes measuring).
build() {  # build NAME SOURCE_DIR BUILD_DIR
  log "build $1: $2"
  cmake -S "$2" -B "$3" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONECAT_WERROR=OFF -DBUILD_TESTING=OFF \
    -DONECAT_PROJECT_VENV="$root/.venv" "${deps[@]}" "${launcher[@]}" >>"$out/before_after_build.log" 2>&1 &&
    cmake --build "$3" -j "$(nproc)" --target onecat attention_bench >>"$out/before_after_build.log" 2>&1 ||
    { tail -40 "$out/before_after_build.log"; exit 1; }
}
build before "$before" "$root/build-ba-before"
after_dir=$root/build-ba-after
if [ -n "${AFTER_BUILD:-}" ]; then
  [ -x "$AFTER_BUILD/onecat" ] || { echo "AFTER_BUILD=$AFTER_BUILD has no onecat"; exit 1; }
  after_dir=$(cd "$AFTER_BUILD" && pwd)
else
  build after "$root" "$after_dir"
fi
log "built both in $(($(date +%s) - start)) s"
[ -z "${BUILD_ONLY:-}" ] || exit 0

runs=$out/before_after_runs
rm -rf "$runs" && mkdir -p "$runs"
py=$(command -v python3)
ckpt=$root/build-ba-model/${SHAPE:-qwen3-8b}${LAYERS:+-L$LAYERS}-${MODEL_AB:-none}
if [ -n "${MODEL_AB:-}" ] && [ ! -f "$ckpt/config.json" ]; then
  log "random-code checkpoint ${SHAPE:-qwen3-8b} $MODEL_AB"
  "$py" "$root/bench/random_checkpoint.py" "$ckpt" --shape "${SHAPE:-qwen3-8b}" ${LAYERS:+--layers "$LAYERS"} \
    --random-codes "$MODEL_AB" >>"$out/before_after.log" 2>&1 || { log "checkpoint failed"; MODEL_AB=; }
fi
if [ -n "${MODEL_AB:-}" ]; then  # model_bench.sh's prompt
  ids=$("$py" -c "import sys; sys.path.insert(0, '$root/bench'); import random_checkpoint as r; print(r.prompt_ids(1024))")
fi
dir_of() { if [ "$1" = after ]; then echo "$after_dir"; else echo "$root/build-ba-$1"; fi; }
run_kind() {  # run_kind KIND BUILD ROUND
  local bin; bin=$(dir_of "$2")
  [ "$(left)" -gt 40 ] || { log "skip $1 $2 round $3: deadline"; return; }
  log "$1 $2 round $3 ($(left) s left)"
  export ONECAT_CACHE_DIR=$bin/cache  # each build its own kernels
  if [ "$1" = attention ]; then
    timeout "$(left)" "$bin/attention_bench" "$runs/attention-$2-$3.json" points "$points" >>"$out/before_after.log" 2>&1
  elif [ "$1" = generate ]; then
    timeout "$(left)" "$bin/onecat" generate --model "$ckpt" --device cuda --prompt-ids "$ids" --max-tokens 256 \
      --prefill-chunk 512 --ignore-eos --json >"$runs/generate-$2-$3.json" 2>>"$out/before_after.log"
  else
    local i=0
    for point in "${gemm_specs[@]}"; do
      local spec=${point%%@*} config=()  # SPEC@CONFIG: that config at every M, not the default
      [ "$spec" = "$point" ] || config=(--config "${point#*@}")
      timeout "$(left)" "$bin/onecat" bench "$spec" --m "$gemm_ms" "${config[@]}" ${GEMM_GRAPH:+--graph} --json \
        >"$runs/gemm-$2-$3-$i.json" \
        2>>"$out/before_after.log"
      i=$((i + 1))
    done
  fi
}
for ((r = 1; r <= rounds; r++)); do
  order="before after"
  [ $((r % 2)) -eq 0 ] && order="after before"  # ABBA: a drift of the clocks cancels
  for kind in $([ "$points" = none ] || echo attention) gemm ${MODEL_AB:+generate}; do
    for b in $order; do run_kind "$kind" "$b" "$r"; done
  done
done

python3 - "$runs" "$out/before_after.json" "$(cat "$before/REVISION" 2>/dev/null)" <<'EOF'
import glob, json, os, statistics, subprocess, sys
runs, dest, before_rev = sys.argv[1:]
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None  # a run cut by the deadline
points = {}  # key -> {"before": [us], "after": [us], ...}
def add(key, info, build, us):
    p = points.setdefault(key, dict(info, before=[], after=[], configs={}))
    p[build].append(us)
    p["configs"].setdefault(build, info.get("config"))
for path in sorted(glob.glob(runs + "/attention-*.json")):
    build = os.path.basename(path).split("-")[1]
    for q in (load(path) or {}).get("points", []):
        key = ("attention", q["spec"], q["batch"], q["ctx"], q["q"])
        add(key, {"kind": "attention", "spec": q["spec"], "batch": q["batch"], "ctx": q["ctx"], "q": q["q"],
                  "config": q["config"]}, build, q["us"])
for path in sorted(glob.glob(runs + "/gemm-*.json")):
    build, index = os.path.basename(path).split("-")[1], os.path.basename(path).split("-")[3].split(".")[0]
    j = load(path) or {}
    for q in j.get("points", []):
        key = ("gemm", index, q["m"])  # the GEMM_SPECS entry: a spec may come twice, with two configs
        add(key, {"kind": "gemm", "spec": j["spec"], "m": q["m"], "config": q["config"]}, build, q["us"])
        if q.get("peer_us"):  # the peer (gemm: cuBLAS fp16; moe op=decode: the four launches), beside each build's run
            points[key].setdefault("peer_us", []).append(q["peer_us"])
            points[key].setdefault("peer_" + build, []).append(q["peer_us"])
for path in sorted(glob.glob(runs + "/generate-*.json")):
    build = os.path.basename(path).split("-")[1]
    tps = (load(path) or {}).get("decode_tokens_per_second")
    if tps:
        add(("generate",), {"kind": "generate", "spec": "decode step (onecat generate, batch 1)", "config": "defaults"},
            build, 1e6 / tps)
table = []
for p in points.values():
    for b in ("before", "after"):
        p[b + "_median_us"] = statistics.median(p[b]) if p[b] else None
    if p["before_median_us"] and p["after_median_us"]:
        p["after_over_before"] = p["after_median_us"] / p["before_median_us"]
    p["same_config"] = len(set(p.pop("configs").values())) == 1
    if p.get("peer_us"):
        p["peer_median_us"] = statistics.median(p["peer_us"])
        # A peer made of onecat's own launches (moe op=decode's four) changes with the build too.
        for b in ("before", "after"):
            if p.get("peer_" + b):
                p["peer_" + b + "_median_us"] = statistics.median(p["peer_" + b])
        if p.get("peer_before_median_us") and p.get("peer_after_median_us"):
            p["peer_after_over_before"] = p["peer_after_median_us"] / p["peer_before_median_us"]
    table.append(p)
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError:
    gpu = ""
json.dump({"before_revision": before_rev, "gpu": gpu, "points": table}, open(dest, "w"), indent=1)
for p in table:
    what = p["spec"] + (f" m={p['m']} [{p['config']}]" if p["kind"] == "gemm" else
                        "" if p["kind"] == "generate" else f" b={p['batch']} ctx={p['ctx']} q={p['q']}")
    r = p.get("after_over_before")
    us = lambda v: "-" if v is None else f"{v:.1f}"
    print(f"{what}: before {us(p['before_median_us'])} us, after {us(p['after_median_us'])} us"
          + (f", after/before {r:.3f}" if r else "") + ("" if p["same_config"] else " (configs differ)")
          + (f", peer {p['peer_median_us']:.1f} us" if p.get("peer_median_us") else "")
          + (f" (before {p['peer_before_median_us']:.1f}, after {p['peer_after_median_us']:.1f}, after/before"
             f" {p['peer_after_over_before']:.3f})" if p.get("peer_after_over_before") else ""))
EOF
log "done: $out/before_after.json"
