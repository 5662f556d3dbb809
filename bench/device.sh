#!/usr/bin/env bash
# Everything the project runs on the device, in one call: build (onecat, the GPU tests, the
# attention benchmark, the Python module), then two lanes of steps. On a two-GPU machine
# (kind nvidia-h200-x2) the lanes run side by side, each on its own GPU (CUDA_VISIBLE_DEVICES),
# so GPU tests and whole-model tunes share one call's 10 minutes; on one GPU lane 1 runs after
# lane 0. Every step ends before DEADLINE seconds (default 560) after the start.
#   device run: bash bench/device.sh "LANE0" "LANE1"   (carry .device, which bench/device_carry.sh fills
#   from Debian 12: SQLite, PCRE2 and utf8proc headers and static libraries, and cpp-httplib with the
#   shared libraries it needs, for `onecat serve`; the device image has none of them)
# e.g. bash bench/device.sh "tests-tune pytest tests-rest" "tune:qwen3-8b:awq4:1 gemm-bench"
# A lane is a space-separated list of steps, run in order:
#   tests-tune       the tuner's GPU tests (gtest TuneGpu.*)
#   pytest           the Python package's GPU tests (pytest -m gpu, output not captured)
#   py-profile       py-overhead under py-spy --native (.device/py-spy, from bench/device_carry.sh): sampled
#                    native and Python stacks -> py_profile.txt (collapsed, one stack a line with its count)
#   pysmoke          bench/py_smoke.py: the package step by step, native frames of a crash
#   tests-rest       the other GPU tests (gtest -TuneGpu.*; more than one call's 10 minutes on a cold
#                    cache: run tests-gemm and tests-other in separate calls instead)
#   tests-gemm       gtest GemmGpu.* (its candidate sweeps compile hundreds of kernels)
#   tests-other      gtest -TuneGpu.*:GemmGpu.*
#   tests-FILTER     gtest with --gtest_filter=FILTER (e.g. tests-GemmGpu.*)
#   cpu-FILTER       the CPU test binary with --gtest_filter=FILTER, here with the image's NVRTC
#   host-overhead    bench/host_overhead.cpp: host time per PreparedOp launch vs a bare one -> host_overhead.json
#   py-overhead      bench/python_host_overhead.py: host time per Python call vs torch's -> py_overhead.json
#   verify-export    the fleet workflow with this GPU's NVRTC: compile qwen3-8b:awq4's kernels (every
#                    family) for this arch, export, and import --verify elsewhere (recompiles each,
#                    byte-identical cubins required)
#   tune:MODEL:RUN   onecat tune --model MODEL --buckets $BUCKETS (default 1,16,512) into the
#                    cache build-device/tune-MODEL-RUN (kept on a warm machine: a tune cut by
#                    the deadline resumes there in the next call), records to tunes.jsonl
#   bench@SPEC@MS[@graph]  onecat bench SPEC --m MS --sweep --json [--graph] >> bench.jsonl
#   moe-bench        onecat bench --sweep on one Qwen3-30B-A3B layer's moe kernels (the one-launch decode layer at
#                    MOE_DECODE_MS, default 1,4,8,16; then route, gate_up, down, combine;
#                    MOE_FORMATS default "awq4 fp8b128 nvfp4 f16", MOE_MS default 1,4,16,64,256,1024,4096) -> moe_bench.jsonl
#                    (the touched experts' bytes at copy bandwidth are each point's floor), after torch's layer on fp16
#                    weights (bench/moe_torch_peer.py, transformers' per-expert loop) at the same MS
#   moe-decode[@graph] the one-launch decode layer alone (MOE_FORMATS, MOE_DECODE_MS), swept, beside its peer: the
#                    four launches at their defaults, same routings and timing -> moe_decode[_graph].jsonl
#   attn-points@FILE build-device/attention_bench one SPEC BATCH CTX Q [CONFIG] per line of FILE
#   gemm-points@FILE[@graph]  onecat bench SPEC --m M --config CONFIG [--graph] per line (SPEC M CONFIG) of FILE
#   kernel-table@FILE  issue 27's table: bench/kernel_table.sh FILE (onecat bench --shapes FILE --sweep --graph, torch
#                    SDPA beside attention; KERNEL_SWEEP=0: defaults only) -> kernels.jsonl, kernel_table.{json,md}
#   attn-bench[@MODE] build-device/attention_bench (MODE quick, sweep or best) -> attention_bench.json
#   sdpa[@MODE]      torch SDPA on the same attention shapes (bench/attention_sdpa.py) -> attention_sdpa.json
#   probe            bench/mma_probe.cu: mma.sync ceilings by warps per SM and warp tile -> probe.jsonl
#   sass@SPEC@CONFIG the sm_90 SASS of one kernel (onecat emit --ptx, ptxas, cuobjdump) -> sass.txt.gz
#   ncu              bench/ncu_profile.sh: Nsight Compute on one launch of each listed kernel -> ncu.txt
#   gpu-model        the GPU forward against the CPU forward (onecat_gpu_model_tests, every architecture × format)
#   gpu-model-FILTER the same with --gtest_filter=FILTER
#   golden           tools/golden_logits.py with transformers -> golden.tar.gz (the CPU tests' committed goldens;
#                    GOLDEN_CASES: its --cases)
#   model-check      bench/model_check.py: the GPU forward against transformers on real shapes -> model_check.jsonl
#                    (MODEL_CASES: its --cases, MODEL_TOKENS: its --tokens)
#   llama-build      bench/llama_peer.sh build (llama.cpp from the carried .llama/, in the background;
#                    model-bench's llama.cpp part waits for it; LLAMA_TYPES its types)
#   serve-bench      after model-bench: `onecat serve` on its checkpoint (SHAPE, LAYERS as there: default the 8B) of SERVE_FORMAT (default f16; others
#                    need model-bench's KEEP_CHECKPOINTS=1), bench/serve_bench.py at SERVE_RATES (default 4,16,inf)
#                    with SERVE_PROMPTS (default 64) requests of SERVE_WORKLOAD (fixed: 1024+256, or mix), greedy
#                    unless SERVE_TEMPERATURE (and SERVE_TOP_P) ask for sampling (SERVE_DEVICE_SAMPLING=0: onecat
#                    serve --no-device-sampling, the host sampler), then the
#                    same against llama-server on the GGUF of SERVE_LLAMA_TYPE (f16, or Q4_K_M for a quantised
#                    format; llama-build builds it) -> serve_bench.jsonl
#                    SERVE_STRUCTURED=F sends that share of onecat's requests with guided_regex (mixed steps)
#   serve-bench@FORMAT@WORKLOAD@RATES[@SHARE]  the same with SERVE_FORMAT, SERVE_WORKLOAD, SERVE_RATES (and
#                    SERVE_STRUCTURED) given (e.g. serve-bench@awq4@mix@8,inf), so one lane can run several
#   tune-ckpt@FORMAT@BUCKETS  onecat tune --buckets BUCKETS on model-bench's 8B FORMAT checkpoint, into its cache
#                    (e.g. tune-ckpt@f16@8 before spec-bench: a verify block's bucket) -> tunes.jsonl
#   spec-bench       on model-bench's f16 8B checkpoint: onecat step-cost (a verify step of k = 2, 4, 8 drafts
#                    against a decode step at batch 1, 8, 32, context 1024) -> spec_bench.jsonl, then onecat
#                    throughput on a repetitive workload (SPEC_SEQS, default "1 8", requests of a 64-token
#                    block repeated 16 times + 256 new tokens) without and with n-gram speculation (k = 4)
#   audit            onecat audit --device cuda: a tiny checkpoint --against default,cpu, model-bench's f16 8B one
#                    --against default (n-gram drafts, k = 4) -> audit.jsonl
#   engine-bench     onecat throughput on model-bench's 8B checkpoints of ENGINE_FORMATS (default f16; others need
#                    KEEP_CHECKPOINTS=1): ENGINE_SEQS (default "8 32 64": 64 is serve-bench's saturation) requests
#                    of 1024 + 256 tokens at once -> engine_bench.jsonl (each line's "run": FORMAT-N)
#   engine-extra     on the f16 8B checkpoint: 32 × 4096 + 16 (prefill-heavy, 8192-token steps), a 10K-token prompt
#                    twice one after the other (the prefix cache), 32 × 1024 + 256 with an fp8 KV cache -> engine_bench.jsonl
#   cache-out        each model-bench work folder's cache exported -> model-SHAPE.sqlite.gz (tunings and kernels; put
#                    it in .tuned/ and carry .tuned: model-bench imports it first, so a later call's tune resumes)
#   graph-trace@FORMAT  bench/graph_trace.py on model-bench's FORMAT checkpoint of SHAPE and LAYERS (f16, or one
#                    kept by KEEP_CHECKPOINTS=1) with its tuned cache: the CUDA-graph decode step's kernels as CUPTI
#                    saw them (each kernel's share of the step, PDL's overlap counted once) -> graph_trace.jsonl
#   model-bench-onecat  model-bench without its llama.cpp part (a later model-bench on the warm machine resumes there)
#   model-bench      bench/model_bench.sh: decode tokens/s vs roofline and llama.cpp -> model_bench.json
#                    (needs .vocab/ggml-vocab-qwen2.gguf carried; SHAPE=qwen3-30b-a3b LAYERS=12 for the MoE
#                    layer shape with fewer layers, its roofline counting only the 8 touched experts)
#   gemm-bench[@graph]  bench/gemm_bench.sh (the 8B linear set; FORMATS/SHAPES select, SWEEP_MS the
#                    swept token counts, DEFAULT_MS those at the default config, GRAPH=1 times CUDA-graph
#                    replays: onecat bench --graph and the torch peer's --graph) -> gemm_bench.jsonl
# BUILD_TARGETS: the CMake targets built (default every one the steps use; "onecat" alone saves
#   about a minute of a cold call whose steps need only the CLI, e.g. moe-bench or bench@).
# Files under $OUT (at most 8 come back): machine.txt build.log steps.log lane0.log lane1.log
#   and those the steps write (tunes.jsonl bench.jsonl attention_bench.json ...); more than 8, and
#   all but the exported caches (*.sqlite.gz) and golden.tar.gz go into results.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
cd "$root"
export PYTHONUNBUFFERED=1
# A GPU test that cannot run (driver, torch or CuPy missing) fails here instead of skipping.
export ONECAT_REQUIRE_GPU=1
start=$(date +%s)
deadline=$((start + ${DEADLINE:-560}))
py=$(command -v python3)
step() { echo "[$(date +%T)] $*" >>"$out/steps.log"; }
# Seconds to the deadline, at least 1: a loop inside a step that runs past it gets a
# one-second timeout per command, not timeout's error on a negative one.
left() { local s=$((deadline - $(date +%s))); echo $((s > 0 ? s : 1)); }
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv
  # The copy's .git may be older than its files (the device has kept one from an earlier call):
  # name HEAD only when the files are HEAD's.
  if head=$(git rev-parse HEAD 2>/dev/null); then
    if git diff --quiet HEAD 2>/dev/null; then echo "tree $head"; else echo "tree: not $head's ($(git diff --shortstat HEAD 2>/dev/null))"; fi
  fi
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$out/machine.txt" 2>&1

lib=$(ldconfig -p 2>/dev/null | awk '/libsqlite3\.so\.0 .*x86-64/ {print $NF; exit}')
[ -n "$lib" ] || lib="$root/.device/libsqlite3.a"
# cpp-httplib as bench/device_carry.sh carried it (without it onecat builds with no serve command).
export PKG_CONFIG_PATH="$root/.device/httplib${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
step "build (SQLite: $lib)"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONECAT_PYTHON=ON -DONECAT_WERROR=OFF \
  -DPython_EXECUTABLE="$py" -DSQLite3_INCLUDE_DIR="$root/.device" -DSQLite3_LIBRARY="$lib" \
  -DPCRE2_INCLUDE_DIR="$root/.device" -DPCRE2_LIBRARY="$root/.device/libpcre2-8.a" \
  -DUTF8PROC_INCLUDE_DIR="$root/.device" -DUTF8PROC_LIBRARY="$root/.device/libutf8proc.a" >"$out/build.log" 2>&1 &&
  cmake --build build-device -j "$(nproc)" --target ${BUILD_TARGETS:-onecat onecat_gpu_tests onecat_gpu_model_tests onecat_tests attention_bench host_overhead _C} >>"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
step "built in $(( $(date +%s) - start )) s"
bin=$root/build-device/onecat
$bin info >>"$out/machine.txt" 2>&1

tune() {  # tune MODEL RUN GPU
  local model=$1 run=$2 dir="$root/build-device/tune-${1//[:\/]/-}-$2"
  mkdir -p "$dir"
  step "gpu$3 tune $model run $run ($(left) s left)"
  local t0=$(date +%s.%N)
  ONECAT_CACHE_DIR=$dir timeout "$(left)" $bin tune --model "$model" --buckets "${BUCKETS:-1,16,512}" --json >"$dir/tune.json" 2>>"$dir/tune.err"
  local rc=$? t1=$(date +%s.%N)
  ONECAT_CACHE_DIR=$dir $bin cache ls --tunings --json >"$dir/records.json" 2>>"$dir/tune.err"
  step "gpu$3 tune $model run $run rc=$rc"
  "$py" - "$model" "$run" "$rc" "$t0" "$t1" "$dir" >>"$out/tunes.jsonl" <<'EOF'
import json, sys
model, run, rc, t0, t1, d = sys.argv[1:]
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        return {"error": str(e)}
err = open(d + "/tune.err", errors="replace").read()
print(json.dumps({"model": model, "run": int(run), "rc": int(rc), "wall_s": float(t1) - float(t0),
                  "summary": load(d + "/tune.json"), "records": load(d + "/records.json"), "stderr_tail": err[-3000:]}))
EOF
}

serve_load() {  # serve_load NAME PORT PID: once /health answers, serve_bench.py (serve_bench's args), then stop PID
  local name=$1 port=$2 pid=$3
  for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 1; done
  timeout "$(left)" "$py" bench/serve_bench.py --url "http://127.0.0.1:$port" --model "$name" "${args[@]}" \
    --out "/tmp/serve_$name.json" &&
    "$py" -c 'import json,sys; print(json.dumps({"server": sys.argv[1], **json.load(open(sys.argv[2]))}))' \
      "$name" "/tmp/serve_$name.json" >>"$out/serve_bench.jsonl"
  kill -TERM "$pid"; wait "$pid"
}

serve_bench() {  # onecat serve, then llama-server, on a model-bench checkpoint of the 8B shape
  # SERVE_FORMAT f16 (default) or a quantised one model-bench kept (KEEP_CHECKPOINTS=1), against
  # llama.cpp's SERVE_LLAMA_TYPE (f16 for f16, else Q4_K_M; model-bench's LLAMA_TYPES made it).
  local fmt=${SERVE_FORMAT:-f16}
  local type=${SERVE_LLAMA_TYPE:-$([ "$fmt" = f16 ] && echo f16 || echo Q4_K_M)}
  local tag=${SHAPE:-qwen3-8b}${LAYERS:+-L$LAYERS}  # model-bench's work folder and GGUF names
  local work=build-device/model-$tag
  local ckpt=$work/$fmt/checkpoint gguf=build-llama/$tag-$type.gguf
  [ -f "$ckpt/config.json" ] || { step "serve-bench: no $ckpt (model-bench with FORMATS=$fmt KEEP_CHECKPOINTS=1)"; return; }
  # Quantised checkpoints of random codes carry no tokenizer: the f16 one's (the same vocabulary).
  [ -f "$ckpt/tokenizer.json" ] || cp $work/f16/checkpoint/tokenizer*.json "$ckpt/" 2>/dev/null
  local args=(--vocab 151936 --rates "${SERVE_RATES:-4,16,inf}" --num-prompts "${SERVE_PROMPTS:-64}" --input-len 1024
    --output-len 256 --workload "${SERVE_WORKLOAD:-fixed}" --temperature "${SERVE_TEMPERATURE:-0}" --top-p "${SERVE_TOP_P:-1}")
  ONECAT_CACHE_DIR=$work/cache $bin serve --model "$ckpt" --device cuda --port 8011 \
    --served-model-name "onecat-$fmt" --max-num-seqs 64 --max-num-batched-tokens 2048 $([ "${SERVE_DEVICE_SAMPLING:-1}" = 0 ] && echo --no-device-sampling) \
    >"$out/serve.log" 2>&1 &
  # SERVE_STRUCTURED=F: that share of onecat's requests under a grammar (llama-server's run without).
  args+=(--structured-share "${SERVE_STRUCTURED:-0}")
  serve_load "onecat-$fmt" 8011 $!
  args=("${args[@]:0:${#args[@]}-2}")
  [ -x build-llama/cmake/bin/llama-server ] && [ -f "$gguf" ] || { step "serve-bench: no llama-server or $gguf"; return; }
  build-llama/cmake/bin/llama-server -m "$gguf" -ngl 99 --port 8012 -np 64 -c $((64 * 1280)) -cb \
    >"$out/llama_server.log" 2>&1 &
  serve_load "llama-server-$type" 8012 $!
}

throughput() {  # throughput RUN FORMAT ARGS...: onecat throughput --json on model-bench's 8B checkpoint, tagged RUN
  local run=$1 fmt=$2; shift 2
  ONECAT_CACHE_DIR=build-device/model-qwen3-8b/cache timeout "$(left)" $bin throughput \
    --model "build-device/model-qwen3-8b/$fmt/checkpoint" --device cuda --json "$@" |
    "$py" -c 'import json,sys; print(json.dumps({"run": sys.argv[1], **json.load(sys.stdin)}))' "$run"
}

lane() {  # lane GPU STEPS...
  local gpu=$1; shift
  export CUDA_VISIBLE_DEVICES=$gpu
  export ONECAT_CACHE_DIR="$root/build-device/cache-gpu$gpu"
  for s in "$@"; do
    [ "$(left)" -gt 15 ] || { step "gpu$gpu skip $s: deadline"; continue; }
    step "gpu$gpu $s ($(left) s left)"
    case $s in
      tests-tune) timeout "$(left)" build-device/tests/onecat_gpu_tests --gtest_filter='TuneGpu.*' ;;
      tests-rest) timeout "$(left)" build-device/tests/onecat_gpu_tests --gtest_filter='-TuneGpu.*' ;;
      tests-gemm) timeout "$(left)" build-device/tests/onecat_gpu_tests --gtest_filter='GemmGpu.*' ;;
      tests-other) timeout "$(left)" build-device/tests/onecat_gpu_tests --gtest_filter='-TuneGpu.*:GemmGpu.*' ;;
      tests-*) timeout "$(left)" build-device/tests/onecat_gpu_tests --gtest_filter="${s#tests-}" ;;
      gpu-model) timeout "$(left)" build-device/tests/onecat_gpu_model_tests ;;
      gpu-model-*) timeout "$(left)" build-device/tests/onecat_gpu_model_tests --gtest_filter="${s#gpu-model-}" ;;
      golden) rm -rf build-device/golden && timeout "$(left)" "$py" tools/golden_logits.py --out build-device/golden \
                ${GOLDEN_CASES:+--cases "$GOLDEN_CASES"} &&
              tar czf "$out/golden.tar.gz" -C build-device golden ;;
      model-check) PYTHONPATH="$root/build-device/python" timeout "$(left)" "$py" bench/model_check.py ${MODEL_CASES:+--cases "$MODEL_CASES"} ${MODEL_TOKENS:+--tokens "$MODEL_TOKENS"} >>"$out/model_check.jsonl" ;;
      llama-build) (OUT=$out bash bench/llama_peer.sh build >"$out/llama_build.log" 2>&1; echo "rc=$?" >>"$out/llama_build.log") &
                   llama_pid=$! ;;
      model-bench|model-bench-onecat)
        # model-bench-onecat: onecat's part alone; a model-bench after it in the lane runs llama.cpp's part
        # alone (no cut tune resumed before it). llama.cpp's part waits for a build started by llama-build
        # in this call, or finds one built before.
        runs=$([ -n "${onecat_done:-}" ] && echo 0 || echo 1)
        llama=$([ "$s" = model-bench ] && { [ -n "${llama_pid:-}" ] || [ -x build-llama/cmake/bin/llama-bench ]; } && echo 1 || echo 0)
        [ "$s" = model-bench ] || onecat_done=1
        ONECAT_RUNS=$runs LLAMA=$llama LLAMA_BUILD_LOG=$([ -n "${llama_pid:-}" ] && echo "$out/llama_build.log") \
          VOCAB_GGUF=$root/.vocab/ggml-vocab-qwen2.gguf OUT=$out timeout "$(left)" bash bench/model_bench.sh "$bin" ;;
      serve-bench) serve_bench ;;
      serve-bench@*) IFS=@ read -r _ f w r g <<<"$s"
        SERVE_FORMAT=$f SERVE_WORKLOAD=$w SERVE_RATES=$r SERVE_STRUCTURED=${g:-${SERVE_STRUCTURED:-0}} serve_bench ;;
      tune-ckpt@*) IFS=@ read -r _ f b <<<"$s"  # more buckets of model-bench's FORMAT checkpoint, into its cache
        ONECAT_CACHE_DIR=build-device/model-qwen3-8b/cache timeout "$(left)" $bin tune \
          --model "build-device/model-qwen3-8b/$f/checkpoint" --buckets "$b" --json >>"$out/tunes.jsonl" ;;
      spec-bench) # speculative decoding's mechanism on model-bench's f16 8B checkpoint -> spec_bench.jsonl
        ONECAT_CACHE_DIR=build-device/model-qwen3-8b/cache timeout "$(left)" $bin step-cost \
          --model build-device/model-qwen3-8b/f16/checkpoint --device cuda --batches 1,8,32 --drafts 2,4,8 \
          --context 1024 --json | "$py" -c 'import json,sys; print(json.dumps({"run": "step-cost", **json.load(sys.stdin)}))' \
          >>"$out/spec_bench.jsonl"
        for n in ${SPEC_SEQS:-1 8}; do
          "$py" -c 'import json, random, sys
r = random.Random(int(sys.argv[1]))
for _ in range(int(sys.argv[1])):
    block = [r.randrange(1000, 150000) for _ in range(64)]
    print(json.dumps({"prompt_ids": block * 16, "max_tokens": 256}))' "$n" >/tmp/repetitive.jsonl
          for k in 0 4; do
            throughput "repetitive-$n-k$k" f16 --dataset /tmp/repetitive.jsonl --max-num-seqs "$n" \
              --max-num-batched-tokens 2048 --num-speculative-tokens "$k" >>"$out/spec_bench.jsonl"
          done
        done ;;
      audit) # onecat audit on the GPU: a tiny checkpoint against the CPU backend and default configs, then
        # model-bench's f16 8B checkpoint (when there) against default configs -> audit.jsonl
        rm -rf build-device/tiny-audit && "$py" tools/make_tiny_checkpoint.py build-device/tiny-audit --arch qwen3 \
          --format f16 --tokenizer >/dev/null &&
          timeout "$(left)" $bin audit --model build-device/tiny-audit --device cuda --against default,cpu \
            --num-draft-tokens 4 --json >>"$out/audit.jsonl"
        [ -f build-device/model-qwen3-8b/f16/checkpoint/config.json ] &&
          ONECAT_CACHE_DIR=build-device/model-qwen3-8b/cache timeout "$(left)" $bin audit \
            --model build-device/model-qwen3-8b/f16/checkpoint --device cuda --against default --num-draft-tokens 4 \
            --max-tokens 32 --json >>"$out/audit.jsonl" ;;
      engine-bench) for fmt in ${ENGINE_FORMATS:-f16}; do  # after model-bench: its 8B checkpoints and tuned cache
          for n in ${ENGINE_SEQS:-8 32 64}; do
            throughput "$fmt-$n" "$fmt" --num-prompts "$n" --input-len 1024 --output-len 256 --max-num-seqs "$n" \
              --max-num-batched-tokens 2048 >>"$out/engine_bench.jsonl"
          done
        done ;;
      cache-out) # each model-bench work folder's cache (tunings and kernels), for .tuned/ in a later session's calls
        for d in "$root"/build-device/model-*/cache; do
          [ -d "$d" ] || continue
          name=$(basename "$(dirname "$d")")
          ONECAT_CACHE_DIR=$d $bin cache export "/tmp/$name.sqlite" >&2 && gzip -c "/tmp/$name.sqlite" >"$out/$name.sqlite.gz"
        done ;;
      engine-extra) # issue 28's other engine runs on model-bench's f16 8B checkpoint -> engine_bench.jsonl
        throughput prefill f16 --num-prompts 32 --input-len 4096 --output-len 16 --max-num-seqs 32 \
          --max-num-batched-tokens 8192 >>"$out/engine_bench.jsonl"
        # A 10K-token prompt twice, one request after the other, after another 10K prompt (warm-up):
        # the second's TTFT is a prefix-cache hit of all its full pages.
        "$py" -c 'import json, random
r = random.Random(1); a = [r.randrange(1000, 150000) for _ in range(10000)]; b = [r.randrange(1000, 150000) for _ in range(10000)]
for p in (a, b, b): print(json.dumps({"prompt_ids": p, "max_tokens": 1}))' >/tmp/prefix.jsonl
        throughput prefix f16 --dataset /tmp/prefix.jsonl --wave 1 --max-num-seqs 1 --max-num-batched-tokens 2048 \
          >>"$out/engine_bench.jsonl"
        throughput kv-fp8-32 f16 --num-prompts 32 --input-len 1024 --output-len 256 --max-num-seqs 32 \
          --max-num-batched-tokens 2048 --kv-cache-dtype fp8 >>"$out/engine_bench.jsonl" ;;
      cpu-*) timeout "$(left)" build-device/tests/onecat_tests --gtest_filter="${s#cpu-}" ;;
      host-overhead) timeout "$(left)" build-device/host_overhead "$out/host_overhead.json" ;;
      verify-export) rm -rf build-device/fleet-a build-device/fleet-b build-device/fleet.onecat
        ONECAT_CACHE_DIR=build-device/fleet-a timeout "$(left)" $bin tune --model qwen3-8b:awq4 --compile-only \
            --arch native --buckets 1,16,512 >/dev/null &&
          ONECAT_CACHE_DIR=build-device/fleet-a $bin cache export build-device/fleet.onecat &&
          ONECAT_CACHE_DIR=build-device/fleet-b timeout "$(left)" $bin cache import build-device/fleet.onecat --verify |
          tail -n 3 ;;
      pytest) PYTHONPATH="$root/build-device/python" PYTHONFAULTHANDLER=1 ONECAT_CRASH_BACKTRACE=1 \
                timeout "$(left)" "$py" -m pytest -m gpu -v -s -rs -p no:cacheprovider python/tests ;;
      graph-trace@*) f=${s#graph-trace@}; work=build-device/model-${SHAPE:-qwen3-8b}${LAYERS:+-L$LAYERS}
        ckpt=$work/$f/checkpoint
        [ -f "$ckpt/config.json" ] || { echo "graph-trace: no $ckpt (model-bench FORMATS=$f KEEP_CHECKPOINTS=1)"; continue; }
        ONECAT_CACHE_DIR=$work/cache PYTHONPATH="$root/build-device/python" timeout "$(left)" \
          "$py" bench/graph_trace.py --model "$ckpt" --out "$out/graph_trace_$f.json.gz" |
          "$py" -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"format": sys.argv[1], **d}))' "$f" \
          >>"$out/graph_trace.jsonl" ;;
      py-overhead) PYTHONPATH="$root/build-device/python" timeout "$(left)" "$py" bench/python_host_overhead.py "$out/py_overhead.json" ;;
      py-profile) PYTHONPATH="$root/build-device/python" timeout "$(left)" .device/py-spy record --native --rate 2000 \
                    --format raw -o "$out/py_profile.txt" -- "$py" bench/python_host_overhead.py ;;
      pysmoke) PYTHONPATH="$root/build-device/python" timeout "$(left)" "$py" bench/py_smoke.py ;;
      tune:*) IFS=: read -r _ m q r <<<"$s"; tune "$m:$q" "$r" "$gpu" ;;
      moe-bench) # one Qwen3-30B-A3B MoE layer's kernels, default and swept configs (MOE_FORMATS, MOE_MS)
        specs=("moe:op=route,experts=128,topk=8,norm=1" "moe:op=combine,topk=8,hidden=2048")
        for fmt in ${MOE_FORMATS:-awq4 fp8b128 nvfp4 f16}; do
          for op in gate_up down; do specs+=("moe:op=$op,experts=128,topk=8,hidden=2048,inter=768,fmt=$fmt"); done
        done
        # The one-launch layer at the decode sizes it serves (MOE_DECODE_MS, default 1,4,8,16), first.
        for fmt in ${MOE_FORMATS:-awq4 fp8b128 nvfp4 f16}; do
          timeout "$(left)" $bin bench "moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=$fmt" \
            --m "${MOE_DECODE_MS:-1,4,8,16}" --sweep --json |
            "$py" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$out/moe_bench.jsonl"
        done
        # The peer first (seconds): a sweep cut by the deadline still has it beside it.
        timeout "$(left)" "$py" bench/moe_torch_peer.py "$out/moe_bench.jsonl" "${MOE_MS:-1,4,16,64,256,1024,4096}"
        for spec in "${specs[@]}"; do
          timeout "$(left)" $bin bench "$spec" --m "${MOE_MS:-1,4,16,64,256,1024,4096}" --sweep --json |
            "$py" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$out/moe_bench.jsonl"
        done ;;
      moe-decode|moe-decode@graph) # op=decode alone, beside its four-launch peer (MOE_FORMATS, MOE_DECODE_MS)
        mode=${s#moe-decode}; mode=${mode#@}
        for fmt in ${MOE_FORMATS:-awq4 fp8b128 nvfp4 f16}; do
          timeout "$(left)" $bin bench "moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=$fmt" \
            --m "${MOE_DECODE_MS:-1,4,8,16}" --sweep --json ${mode:+--$mode} |
            "$py" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$out/moe_decode${mode:+_$mode}.jsonl"
        done ;;
      bench@*) IFS=@ read -r _ spec ms mode <<<"$s"
               timeout "$(left)" $bin bench "$spec" --m "$ms" --sweep --json ${mode:+--$mode} | "$py" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$out/bench.jsonl" ;;
      attn-points@*) while read -r spec batch ctx q config; do  # FILE: lines SPEC BATCH CTX Q [CONFIG]
          [ -z "$spec" ] || [ "${spec:0:1}" = "#" ] || timeout "$(left)" build-device/attention_bench /tmp/one.json one \
            "$spec" "$batch" "$ctx" "$q" $config
        done <"${s#attn-points@}" ;;
      gemm-points@*) IFS=@ read -r _ file mode <<<"$s"
        while read -r spec m config; do  # FILE: lines SPEC M CONFIG
          [ -z "$spec" ] || [ "${spec:0:1}" = "#" ] || timeout "$(left)" "$bin" bench "$spec" --m "$m" --config "$config" ${mode:+--$mode}
        done <"$file" ;;
      kernel-table@*) SWEEP=${KERNEL_SWEEP:-1} PYTHON=$py timeout "$(left)" bash bench/kernel_table.sh "${s#kernel-table@}" "$out" "$bin" ;;
      attn-bench*) timeout "$(left)" build-device/attention_bench "$out/attention_bench.json" "${s#attn-bench@}" ;;
      sdpa*) timeout "$(left)" "$py" bench/attention_sdpa.py "$out/attention_sdpa.json" "${s#sdpa@}" ;;
      probe) nvcc -O3 -std=c++17 -arch=sm_90 -o build-device/mma_probe bench/mma_probe.cu &&
               timeout "$(left)" build-device/mma_probe >>"$out/probe.jsonl" ;;
      sass@*) IFS=@ read -r _ spec config <<<"$s"  # SASS of one kernel (sm_90) -> sass.txt.gz
              $bin emit "$spec" --config "$config" --arch sm_90 --ptx >/tmp/k.ptx && ptxas -arch=sm_90 -O3 /tmp/k.ptx -o /tmp/k.cubin &&
                { echo "== $spec $config"; cuobjdump -sass /tmp/k.cubin; } | gzip >>"$out/sass.txt.gz" ;;
      ncu) OUT=$out timeout "$(left)" bash bench/ncu_profile.sh "$root/build-device" ;;
      gemm-bench*) GRAPH=${GRAPH:-$([ "$s" = gemm-bench@graph ] && echo 1)} OUT=$out timeout "$(left)" \
          bash bench/gemm_bench.sh "$bin" "${SWEEP_MS-1,16}" "${DEFAULT_MS-2,4,8,32,128,512,2048}" ;;
      *) echo "unknown step $s" ;;
    esac
    step "gpu$gpu $s rc=$?"
  done
}
read -r -a lane0 <<<"${1:-}"
read -r -a lane1 <<<"${2:-}"
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
  lane 0 "${lane0[@]}" >"$out/lane0.log" 2>&1 &
  lane 1 "${lane1[@]}" >"$out/lane1.log" 2>&1 &
  wait
else
  lane 0 "${lane0[@]}" >"$out/lane0.log" 2>&1
  lane 0 "${lane1[@]}" >"$out/lane1.log" 2>&1
fi
# The device returns at most 8 files from $OUT: past that, everything but the exported caches and
# goldens goes into one results.tar.gz, so no step's output is left behind.
(cd "$out" && files=(*) && if [ "${#files[@]}" -gt 8 ]; then
  keep='\.sqlite\.gz$|^golden\.tar\.gz$'
  mapfile -t pack < <(printf '%s\n' "${files[@]}" | grep -Ev "$keep")
  tar czf results.tar.gz "${pack[@]}" && rm -f "${pack[@]}"
fi)
cat "$out/steps.log" 2>/dev/null || tar xzOf "$out/results.tar.gz" steps.log
