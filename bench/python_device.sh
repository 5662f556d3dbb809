#!/usr/bin/env bash
# One device call: build the onecat Python extension with the image's own Python (which has
# pybind11 and torch, and no internet), then run the Python tests — the GPU ones (marker
# gpu) and the CPU ones — and leave logs and JUnit XML under $OUT.
#   device run: bash bench/python_device.sh   (carry: .device)
# .device holds sqlite3.h (the image has no SQLite header). The extension is a shared
# module and Debian's static libsqlite3.a is not position-independent, so it links the
# image's libsqlite3.so.0 (Python's sqlite3 module brings one), else .device/libsqlite3.so.0.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
cd "$root"
py=$(command -v python3)
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  git rev-parse HEAD 2>/dev/null || true
  "$py" -c 'import sys, pybind11; print(sys.version); print("pybind11", pybind11.__version__)'
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$out/machine.txt" 2>&1

sqlite_so() {
  local lib
  lib=$(ldconfig -p 2>/dev/null | awk '/libsqlite3\.so\.0 .*x86-64/ {print $NF; exit}')
  if [ -z "$lib" ]; then
    local mod
    mod=$("$py" -c 'import _sqlite3; print(_sqlite3.__file__)' 2>/dev/null)
    [ -n "$mod" ] && lib=$(ldd "$mod" 2>/dev/null | awk '/libsqlite3/ {print $3; exit}')
  fi
  [ -z "$lib" ] && [ -f "$root/.device/libsqlite3.so.0" ] && lib="$root/.device/libsqlite3.so.0"
  echo "$lib"
}
lib=$(sqlite_so)
if [ -z "$lib" ]; then
  echo "python_device: no shared libsqlite3 found on this image (nor .device/libsqlite3.so.0)" | tee "$out/build.log"
  exit 1
fi
echo "SQLite: $lib" >>"$out/machine.txt"
cmake -S . -B build-py -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONECAT_PYTHON=ON -DONECAT_WERROR=OFF -DPython_EXECUTABLE="$py" \
  -DSQLite3_INCLUDE_DIR="$root/.device" -DSQLite3_LIBRARY="$lib" >"$out/build.log" 2>&1 &&
  cmake --build build-py -j 16 --target _C >>"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }

export ONECAT_CACHE_DIR=$(mktemp -d)/cache
export PYTHONPATH="$root/build-py/python${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c 'import json, onecat; print(json.dumps(onecat.info(), indent=2))' >"$out/info.json" 2>&1
"$py" -m pytest -m gpu -v -rs -p no:cacheprovider python/tests --junitxml="$out/pytest-gpu.xml" \
  >"$out/pytest-gpu.log" 2>&1
gpu_rc=$?
"$py" -m pytest -m "not gpu" -q -rs -p no:cacheprovider python/tests --junitxml="$out/pytest-cpu.xml" \
  >"$out/pytest-cpu.log" 2>&1
cpu_rc=$?
tail -40 "$out/pytest-gpu.log"
tail -5 "$out/pytest-cpu.log"
exit $(( gpu_rc != 0 || cpu_rc != 0 ))
