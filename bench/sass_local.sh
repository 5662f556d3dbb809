#!/usr/bin/env bash
# The SASS of one generated kernel on this machine, with no GPU: `onecat emit --ptx`, ptxas of
# CUDA 12.8 (the NVRTC the project pins), cuobjdump and nvdisasm of CUDA 13.5, then
# bench/sass_stats.py (instructions of the kernel and of each loop, opcode mix, registers,
# spills). For comparing two versions of a template by instruction counts before a device run.
# nvdisasm 13 reads sm_75 and later: for sm_70 only ptxas's registers and spills are printed.
#   bash bench/sass_local.sh ARCH SPEC [CONFIG]   (ARCH e.g. sm_90, sm_80, sm_70)
#   env: ONECAT (default build/onecat), OUT (default /tmp/onecat-sass: the .ptx, .cubin, .sass kept)
# The tools are pinned PyPI wheels, downloaded with the project's .venv pip and unpacked on first
# use into SASS_TOOLS (default ~/.cache/onecat-sass-tools: outside the tree, which the device
# run would otherwise have to carry, 143 MB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: bash bench/sass_local.sh ARCH SPEC [CONFIG]" >&2; exit 2; }
arch=$1 spec=$2 config=${3:-}
onecat=${ONECAT:-$root/build/onecat}
out=${OUT:-/tmp/onecat-sass}
tools=${SASS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/onecat-sass-tools}
py=$root/.venv/bin/python
[ -x "$py" ] || py=$(command -v python3)
wheels=("nvidia-cuda-nvcc-cu12==12.8.93" "nvidia-cuda-cuobjdump==13.5.37" "nvidia-cuda-nvdisasm==13.5.37")
if [ ! -f "$tools/ready" ]; then
  echo "sass_local: fetching ${wheels[*]} into $tools" >&2
  rm -rf "$tools" && mkdir -p "$tools/wheels"
  "$root/.venv/bin/pip" download -q --no-deps -d "$tools/wheels" "${wheels[@]}"
  for w in "$tools"/wheels/*.whl; do "$py" -m zipfile -e "$w" "$tools/unpacked"; done
  mkdir -p "$tools/bin"
  for t in ptxas cuobjdump nvdisasm; do
    f=$(find "$tools/unpacked" -type f -name "$t" | head -1)
    [ -n "$f" ] || { echo "sass_local: no $t in the wheels" >&2; exit 1; }
    chmod +x "$f" && ln -sf "$f" "$tools/bin/$t"
  done
  touch "$tools/ready"
fi
export PATH=$tools/bin:$PATH
mkdir -p "$out"
name=$(printf '%s %s %s' "$arch" "$spec" "$config" | sha1sum | cut -c1-12)
"$onecat" emit --arch "$arch" --ptx ${config:+--config "$config"} "$spec" >"$out/$name.ptx"
ptxas -arch="$arch" -O3 -v "$out/$name.ptx" -o "$out/$name.cubin" 2>"$out/$name.ptxas.log"
echo "$arch $spec ${config:-(default config)} -> $out/$name.*"
if [ "$arch" = sm_70 ]; then
  grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" "$out/$name.ptxas.log" | paste -sd, -
  exit 0
fi
cuobjdump -sass "$out/$name.cubin" >"$out/$name.sass" 2>/dev/null
"$py" "$root/bench/sass_stats.py" "$out/$name.sass" --ptxas-log "$out/$name.ptxas.log"
