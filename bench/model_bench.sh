#!/usr/bin/env bash
# Decode speed of a whole model on the device, in one run: onecat (`onecat generate --device
# cuda`: tuned kernels, CUDA graphs) against the bandwidth roofline (copy bandwidth measured
# here ÷ bytes read per token: every weight once plus the KV cache at the mean context) and
# against llama.cpp (bench/llama_peer.sh: the same random-weight checkpoint converted by its
# convert_hf_to_gguf.py, `llama-bench -p PROMPT -n GEN`). Batch 1.
#   bash bench/model_bench.sh BIN   (env: SHAPE qwen3-8b, PROMPT 1024, GEN 256, OUT, VOCAB_GGUF,
#                                    LLAMA=1 to run llama.cpp too: bench/llama_peer.sh build first;
#                                    LLAMA_TYPES its types, default f16, e.g. "f16 Q8_0 Q4_K_M")
# Also runs generate --profile: the decode step's kernel times by op beside the step time.
# Writes $OUT/model_bench.json.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$1
shape=${SHAPE:-qwen3-8b}
prompt=${PROMPT:-1024}
gen=${GEN:-256}
out=${OUT:-$root/device-out}
py=$(command -v python3)
work=$root/build-device/model-$shape
mkdir -p "$out" "$work"
log() { echo "[$(date +%T)] model_bench: $*" >&2; }

ckpt=$work/checkpoint
if [ ! -f "$ckpt/config.json" ]; then
  log "random checkpoint $shape"
  "$py" "$root/bench/random_checkpoint.py" "$ckpt" --shape "$shape" --vocab-gguf "${VOCAB_GGUF:?the qwen2 vocabulary gguf}" || exit 1
fi

log "copy bandwidth"
"$py" - >"$work/copy.json" <<'EOF'
import json, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(20): y.copy_(x)
e.record(); torch.cuda.synchronize()
print(json.dumps({"copy_bytes_per_s": 2 * 20 * x.numel() / (s.elapsed_time(e) / 1e3)}))
EOF

log "tune bucket 1"
ONECAT_CACHE_DIR=$work/cache timeout "${TUNE_S:-300}" "$bin" tune --model "$ckpt" --buckets 1 --json >"$work/tune.json" 2>"$work/tune.err" ||
  log "tune failed: $(tail -3 "$work/tune.err")"

ids=$("$py" -c "import random; random.seed(0); print(','.join(str(random.randrange(1000, 150000)) for _ in range($prompt)))")
log "onecat generate"
ONECAT_CACHE_DIR=$work/cache "$bin" generate --model "$ckpt" --device cuda --prompt-ids "$ids" --max-tokens "$gen" \
  --prefill-chunk 512 --ignore-eos --json >"$work/generate.json" 2>"$work/generate.err" ||
  log "generate failed: $(tail -3 "$work/generate.err")"
ONECAT_CACHE_DIR=$work/cache "$bin" generate --model "$ckpt" --device cuda --prompt-ids "$ids" --max-tokens "$gen" \
  --prefill-chunk 512 --ignore-eos --json --no-cuda-graphs >"$work/generate_eager.json" 2>>"$work/generate.err" ||
  log "eager generate failed: $(tail -3 "$work/generate.err")"
# Every kernel timed with events (op by op): the sum of the step's kernel times by op.
ONECAT_CACHE_DIR=$work/cache "$bin" generate --model "$ckpt" --device cuda --prompt-ids "$ids" --max-tokens "$gen" \
  --prefill-chunk 512 --ignore-eos --json --profile >"$work/generate_profile.json" 2>>"$work/generate.err" ||
  log "profiled generate failed: $(tail -3 "$work/generate.err")"

summarize() {  # written after onecat's runs and again after llama.cpp's (a deadline may cut those)
"$py" - "$ckpt" "$work" "$out" "$prompt" "$gen" >"$out/model_bench.json" <<'EOF'
import glob, json, os, sys
ckpt, work, out, prompt, gen = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def load(p):
    try: return json.load(open(p))
    except Exception as e: return {"error": str(e)}
cfg = json.load(open(os.path.join(ckpt, "config.json")))
h, inter, L, heads, kvh = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
d = cfg.get("head_dim") or h // heads
vocab = cfg["vocab_size"]
linear = L * (h * (heads + 2 * kvh) * d + heads * d * h + 3 * h * inter)
weight_bytes = 2 * (linear + vocab * h) + 2 * L * 2 * h  # fp16 linears, lm_head, norms
mean_context = prompt + gen / 2
kv_bytes = L * 2 * kvh * d * 2 * mean_context
copy = load(os.path.join(work, "copy.json")).get("copy_bytes_per_s")
roof = copy / (weight_bytes + kv_bytes) if copy else None
result = {"shape": os.path.basename(work)[len("model-"):], "prompt": prompt, "gen": gen,
          "weight_bytes": weight_bytes, "kv_bytes_per_token_mean": kv_bytes, "copy_bytes_per_s": copy,
          "roofline_tokens_per_s": roof}
for name in ("generate", "generate_eager", "generate_profile"):
    g = load(os.path.join(work, name + ".json"))
    result[name] = {k: g.get(k) for k in ("decode_tokens_per_second", "prefill_seconds", "decode_seconds", "finish_reason", "load", "profile", "error")}
    tps = g.get("decode_tokens_per_second")
    if tps and roof: result[name]["fraction_of_roofline"] = tps / roof
llama = []
for line in open(os.path.join(out, "llama_bench.jsonl")) if os.path.exists(os.path.join(out, "llama_bench.jsonl")) else []:
    r = json.loads(line)
    llama.append({k: r.get(k) for k in ("model_type", "n_prompt", "n_gen", "avg_ts", "stddev_ts")})
result["llama_cpp"] = llama
tune = load(os.path.join(work, "tune.json"))
result["tune"] = tune if "error" in tune else {"summary": str(tune)[:2000]}
print(json.dumps(result, indent=1))
EOF
}
summarize
if [ "${LLAMA:-0}" = 1 ] && [ -n "${LLAMA_BUILD_LOG:-}" ]; then
  log "waiting for llama.cpp's build"
  until grep -q '^rc=' "$LLAMA_BUILD_LOG" 2>/dev/null; do sleep 5; done
  [ -x "$root/build-llama/cmake/bin/llama-bench" ] || { log "llama.cpp did not build: $(tail -3 "$LLAMA_BUILD_LOG")"; LLAMA=0; }
fi
if [ "${LLAMA:-0}" = 1 ]; then
  log "llama.cpp"
  rm -f "$out/llama_bench.jsonl"
  [ -f "$root/build-llama/$shape-f16.gguf" ] || PROMPT=$prompt GEN=$gen OUT=$out bash "$root/bench/llama_peer.sh" "convert:$ckpt:$shape" ||
    log "llama.cpp convert failed"
  for type in ${LLAMA_TYPES:-f16}; do
    [ "$type" = f16 ] || [ -f "$root/build-llama/$shape-$type.gguf" ] || OUT=$out bash "$root/bench/llama_peer.sh" "quantize:$shape:$type" ||
      log "llama.cpp quantize $type failed"
    PROMPT=$prompt GEN=$gen OUT=$out bash "$root/bench/llama_peer.sh" "bench:$shape:$type" || log "llama.cpp bench $type failed"
  done
fi

summarize
cat "$out/model_bench.json"
