#!/usr/bin/env bash
# One device call for the attention family: build, the attention GPU tests, the benchmark
# and its torch SDPA peer; logs and JSON under $OUT.
#   device run (carry .device): [SDPA=0] bash bench/attention_device_run.sh [quick|sweep]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
cd "$root"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/machine.txt" 2>&1
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSQLite3_INCLUDE_DIR="$root/.device" -DSQLite3_LIBRARY="$root/.device/libsqlite3.a" >"$out/build.log" 2>&1 &&
  cmake --build build-device -j 16 --target onecat onecat_gpu_tests attention_bench >>"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
export ONECAT_CACHE_DIR=$(mktemp -d)/cache
timeout 150 ./build-device/tests/onecat_gpu_tests --gtest_filter='AttentionGpu.*' 2>&1 | tee "$out/gpu_attention.log" | grep -E "FAILED|Failure|OK \]|PASSED|error|Expected|seed" | head -80
timeout 150 ./build-device/attention_bench "$out/attention_bench.json" "${1:-}" 2>&1 | tee "$out/attention_bench.log"
[ "${SDPA:-1}" = 0 ] || timeout 90 python3 bench/attention_sdpa.py "$out/attention_sdpa.json" "${1:-}" 2>&1 | tee "$out/attention_sdpa.log" | tail -20
