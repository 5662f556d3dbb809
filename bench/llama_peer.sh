#!/usr/bin/env bash
# llama.cpp, the speed peer of onecat's decode (what V100 owners run today), on the device.
# Its source is vendor/llama.cpp of the pinned llama-cpp-python sdist, unpacked by
# bench/llama_source.sh into the ignored .llama/ and carried (the device has no internet). Steps, run in order:
#   build                 llama-bench, llama-batched-bench, llama-quantize and llama-server for sm_90 into build-llama/ (kept on a warm machine)
#   convert:DIR:NAME      convert_hf_to_gguf.py DIR → build-llama/NAME-f16.gguf (DIR needs its tokenizer files)
#   quantize:NAME:TYPE    build-llama/NAME-f16.gguf → build-llama/NAME-TYPE.gguf (llama-quantize; Q8_0, Q4_K_M, …)
#   bench:NAME:TYPE       llama-bench -p $PROMPT -n $GEN on build-llama/NAME-TYPE.gguf (TYPE f16 for the
#                         converted file), one JSON line per result into $OUT/llama_bench.jsonl
#   batched:NAME:TYPE:N   llama-batched-bench with N sequences of $PROMPT + $GEN tokens each (its decode
#                         speed speed_tg is N streams together) -> $OUT/llama_batched.jsonl, one line with type
#   e.g. bash bench/llama_peer.sh build convert:/tmp/qwen3-8b:qwen3-8b quantize:qwen3-8b:Q8_0 bench:qwen3-8b:f16
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/.llama
build=$root/build-llama
out=${OUT:-$root/device-out}
py=${PYTHON:-$(command -v python3)}
mkdir -p "$out" "$build"
log() { echo "[$(date +%T)] $*" | tee -a "$out/llama_steps.log" >&2; }
[ -f "$src/CMakeLists.txt" ] || { log "no llama.cpp source in $src: unpack the sdist's vendor/llama.cpp there and carry it"; exit 2; }
for s in "$@"; do
  log "$s"
  case $s in
    build)  # llama-server after the others: a failure there costs serve-bench its peer, not model-bench
      cmake -S "$src" -B "$build/cmake" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$build/configure.log" 2>&1 &&
        cmake --build "$build/cmake" -j "$(nproc)" --target llama-bench llama-batched-bench llama-quantize >"$build/build.log" 2>&1 ||
        { tail -n 30 "$build/configure.log" "$build/build.log"; exit 1; }
      cmake --build "$build/cmake" -j "$(nproc)" --target llama-server >"$build/build-server.log" 2>&1 ||
        { tail -n 30 "$build/build-server.log"; exit 1; } ;;
    convert:*) IFS=: read -r _ dir name <<<"$s"
      PYTHONPATH="$src/gguf-py" "$py" "$src/convert_hf_to_gguf.py" "$dir" --outtype f16 \
        --outfile "$build/$name-f16.gguf.part" >"$build/convert-$name.log" 2>&1 || { tail -n 30 "$build/convert-$name.log"; exit 1; }
      mv "$build/$name-f16.gguf.part" "$build/$name-f16.gguf" ;;  # a call cut mid-way leaves no GGUF a later one would take
    quantize:*) IFS=: read -r _ name type <<<"$s"
      "$build/cmake/bin/llama-quantize" "$build/$name-f16.gguf" "$build/$name-$type.gguf.part" "$type" \
        >"$build/quantize-$name-$type.log" 2>&1 || { tail -n 30 "$build/quantize-$name-$type.log"; exit 1; }
      mv "$build/$name-$type.gguf.part" "$build/$name-$type.gguf" ;;
    bench:*) IFS=: read -r _ name type <<<"$s"
      "$build/cmake/bin/llama-bench" -m "$build/$name-$type.gguf" -p "${PROMPT:-1024}" -n "${GEN:-256}" -ngl 99 \
        -r "${REPS:-3}" -o jsonl >>"$out/llama_bench.jsonl" 2>"$build/bench-$name-$type.log" ||
        { tail -n 30 "$build/bench-$name-$type.log"; exit 1; } ;;
    batched:*) IFS=: read -r _ name type n <<<"$s"
      "$build/cmake/bin/llama-batched-bench" -m "$build/$name-$type.gguf" -npp "${PROMPT:-1024}" -ntg "${GEN:-256}" -npl "$n" \
        -c $((n * (${PROMPT:-1024} + ${GEN:-256}))) -ngl 99 --output-format jsonl 2>"$build/batched-$name-$type.log" |
        "$py" -c 'import json, sys
for line in sys.stdin:
    if line.startswith("{"): print(json.dumps({"model_type": sys.argv[1], **json.loads(line)}))' "$type" >>"$out/llama_batched.jsonl" &&
        grep -q '"model_type": "'"$type"'"' "$out/llama_batched.jsonl" || { tail -n 30 "$build/batched-$name-$type.log"; exit 1; } ;;
    *) log "unknown step $s"; exit 2 ;;
  esac
done
