#!/usr/bin/env bash
# One device call: build onecat on the GPU machine (its image has no sqlite3.h, so the
# header and Debian's static libsqlite3.a travel in .device/), run the GPU tests and the
# JIT benchmark, and leave logs and JSON under $OUT.
#   device run: bash bench/device_run.sh   (carry: .device)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
cd "$root"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  git rev-parse HEAD 2>/dev/null || true
} >"$out/machine.txt" 2>&1
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSQLite3_INCLUDE_DIR="$root/.device" -DSQLite3_LIBRARY="$root/.device/libsqlite3.a" >"$out/build.log" 2>&1 &&
  cmake --build build-device -j 16 --target onecat onecat_gpu_tests >>"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
export ONECAT_CACHE_DIR=$(mktemp -d)/cache
./build-device/onecat info | tee "$out/info.txt"
ctest --test-dir build-device -L gpu --output-on-failure 2>&1 | tee "$out/gpu_tests.log" | tail -30
"${@:-true}"
