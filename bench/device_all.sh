#!/usr/bin/env bash
# One device call for everything that needs the GPU, most important first, each step with
# its own time limit, results under $OUT as they come:
#   1. build onecat, its GPU tests and the Python extension (one build dir; the image has no
#      sqlite3.h, so .device/ carries the header, and its own libsqlite3.so.0 is linked);
#   2. the GPU tests (the tuner's, pytest -m gpu, then the rest of the ctest `gpu` binary);
#   3. `onecat tune` of qwen3-8b in two quantised forms (records dumped with every candidate);
#   4. the gemm benchmark on large shapes (onecat bench, cuBLAS peer in the same run);
#   5. the tunes again in fresh caches (repeatability).
# The steps together can outrun one call's 10 minutes: TUNE_S (default 110) bounds each tune.
#   device run: bash bench/device_all.sh   (carry: .device)
# Files: machine.txt build.log bench.jsonl tunes.jsonl steps.log gpu_tests.log pytest-gpu.log
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
cd "$root"
export PYTHONUNBUFFERED=1
py=$(command -v python3)
step() { echo "[$(date +%T)] $*" >>"$out/steps.log"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  git rev-parse HEAD 2>/dev/null || true
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$out/machine.txt" 2>&1

lib=$(ldconfig -p 2>/dev/null | awk '/libsqlite3\.so\.0 .*x86-64/ {print $NF; exit}')
[ -n "$lib" ] || lib="$root/.device/libsqlite3.a"
step "build (SQLite: $lib)"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONECAT_PYTHON=ON -DONECAT_WERROR=OFF \
  -DPython_EXECUTABLE="$py" -DSQLite3_INCLUDE_DIR="$root/.device" -DSQLite3_LIBRARY="$lib" >"$out/build.log" 2>&1 &&
  cmake --build build-device -j 16 --target onecat onecat_gpu_tests _C >>"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
bin=build-device/onecat
export ONECAT_CACHE_DIR=$(mktemp -d)/cache
$bin info >>"$out/machine.txt" 2>&1


tune() {  # tune MODEL RUN LIMIT: a fresh cache per run, then the records with every candidate
  local model=$1 run=$2 limit=$3 dir
  dir=$(mktemp -d)
  step "tune $model run $run"
  local t0=$(date +%s.%N)
  ONECAT_CACHE_DIR=$dir timeout "$limit" $bin tune --model "$model" --buckets 1,16,512 --budget-s $((limit - 25)) --json >"$dir/tune.json" 2>>"$out/steps.log"
  local rc=$? t1=$(date +%s.%N)
  ONECAT_CACHE_DIR=$dir $bin cache ls --tunings --json >"$dir/records.json" 2>>"$out/steps.log"
  "$py" - "$model" "$run" "$rc" "$t0" "$t1" "$dir" >>"$out/tunes.jsonl" <<'EOF'
import json, sys
model, run, rc, t0, t1, d = sys.argv[1:]
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        return {"error": str(e)}
print(json.dumps({"model": model, "run": int(run), "rc": int(rc), "wall_s": float(t1) - float(t0),
                  "summary": load(d + "/tune.json"), "records": load(d + "/records.json")}))
EOF
}
# The tuner's and the Python package's GPU tests first (never run yet), then the rest.
step "gpu tests: tuner"
timeout 240 build-device/tests/onecat_gpu_tests --gtest_filter='TuneGpu.*' >"$out/gpu_tests.log" 2>&1
step "gpu tests: tuner rc=$?"
step "pytest gpu"
PYTHONPATH="$root/build-device/python" PYTHONFAULTHANDLER=1 ONECAT_CRASH_BACKTRACE=1 timeout 150 "$py" -m pytest -m gpu -x -v -rs -p no:cacheprovider \
  python/tests >"$out/pytest-gpu.log" 2>&1
step "pytest rc=$?"
step "gpu tests: the rest"
timeout 420 build-device/tests/onecat_gpu_tests --gtest_filter='-TuneGpu.*' >>"$out/gpu_tests.log" 2>&1
step "gpu tests: the rest rc=$?"

tune qwen3-8b:awq4 1 ${TUNE_S:-110}
tune qwen3-8b:fp8 1 ${TUNE_S:-110}

step "gemm bench"
for spec in gemm:n=28672,k=4096,fmt=f16 gemm:n=28672,k=4096,fmt=awq4 gemm:n=6144,k=4096,fmt=fp8b128 gemm:n=4096,k=14336,fmt=nvfp4; do
  timeout 40 $bin bench "$spec" --m 1,16,128,512,2048 --json | "$py" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' \
    >>"$out/bench.jsonl" 2>>"$out/steps.log"
done

tune qwen3-8b:awq4 2 ${TUNE_S:-110}

tune qwen3-8b:fp8 2 ${TUNE_S:-110}
tail -5 "$out/steps.log"
