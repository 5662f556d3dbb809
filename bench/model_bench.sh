#!/usr/bin/env bash
# Decode speed of a whole model on the device, in one run: onecat (`onecat generate --device
# cuda`: tuned kernels, CUDA graphs) against the bandwidth roofline (copy bandwidth measured
# here ÷ bytes read per token: every weight once — the checkpoint's tensor bytes less the
# embedding table, of which a step reads one row — plus the KV cache at the mean context) and
# against llama.cpp (bench/llama_peer.sh: the f16 random-weight checkpoint converted by its
# convert_hf_to_gguf.py and quantised by llama-quantize, `llama-bench -p PROMPT -n GEN`). Batch 1.
#   bash bench/model_bench.sh BIN   (env: SHAPE qwen3-8b (or qwen3-1.7b, qwen3-30b-a3b), LAYERS (default:
#                                    the shape's; fewer for a MoE shape whose 48 layers overflow the disk),
#                                    PROMPT 1024, GEN 256, OUT, VOCAB_GGUF,
#                                    FORMATS (default f16) e.g. "f16 fp8 awq4 nvfp4",
#                                    TUNE_S seconds of tuning per format (default 300),
#                                    LLAMA=1 to run llama.cpp too: bench/llama_peer.sh build first;
#                                    LLAMA_TYPES its types, default f16, e.g. "f16 Q8_0 Q4_K_M",
#                                    BATCH=N to add N concurrent requests of PROMPT + GEN: `onecat
#                                    throughput` against llama-batched-bench -npl N (and once more with
#                                    --profile and 16 new tokens: the batched decode step by op),
#                                    TUNE_BUCKETS (default 1, or "1,N" with BATCH), TUNE_FAMILIES
#                                    (default every family: onecat tune --families),
#                                    ONECAT_RUNS=0: llama.cpp's part alone, after onecat's in an earlier step)
# f16 is bench/random_checkpoint.py's checkpoint (transformers' save_pretrained, a real
# tokenizer); the quantised formats are tools/make_tiny_checkpoint.py --random-codes at the same
# shape (random codes in each format's real layout: speed only). Each format: its specs tuned
# for TUNE_BUCKETS, then generate with CUDA graphs (UNFUSED=1: again with --no-fused-norms, the
# decode step's norms as their own launches: what fusing them gains where the GPU fuses them,
# models::kGpuFusesNorms; off, the same run twice; NO_PDL=1: again with ONECAT_PDL=0, sm_90+
# kernels launched without programmatic dependent launch, docs/jit.md; NO_MOE_DECODE=1: again with ONECAT_MOE_DECODE=0, a
# MoE layer's decode step as four launches instead of one, docs/moe.md), op by op, and --profile (the decode step's
# kernel times by op beside the step time). A format whose runs a call cut short left finished is not run
# again in the next call on a warm machine (the work folder stays). Writes $OUT/model_bench.json.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$1
shape=${SHAPE:-qwen3-8b}
prompt=${PROMPT:-1024}
gen=${GEN:-256}
out=${OUT:-$root/device-out}
py=$(command -v python3)
tag=$shape${LAYERS:+-L$LAYERS}  # names the work folder and the GGUF files
work=$root/build-device/model-$tag
mkdir -p "$out" "$work"
log() { echo "[$(date +%T)] model_bench: $*" >&2; }

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

summarize() {  # after every format, and again after llama.cpp (a deadline may cut the rest)
"$py" - "$work" "$out" "$prompt" "$gen" "${FORMATS:-f16}" >"$out/model_bench.json" <<'EOF'
import json, os, sys
work, out, prompt, gen, formats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
def load(p):
    try: return json.load(open(p))
    except Exception as e: return {"error": str(e)}
copy = load(os.path.join(work, "copy.json")).get("copy_bytes_per_s")
result = {"shape": os.path.basename(work)[len("model-"):], "prompt": prompt, "gen": gen, "copy_bytes_per_s": copy,
          "formats": {}}
RUNS = ("generate", "generate_unfused", "generate_no_pdl", "generate_no_moe_decode", "generate_eager", "generate_profile")
for fmt in formats:
    d = os.path.join(work, fmt)
    if not os.path.exists(os.path.join(d, "config.json")): continue  # a copy: the checkpoint may be gone
    cfg = json.load(open(os.path.join(d, "config.json")))
    h, L, heads, kvh = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dim = cfg.get("head_dim") or h // heads
    kv_bytes = L * 2 * kvh * dim * 2 * (prompt + gen / 2)
    # A MoE step reads only its token's experts: the experts' share of the weight bytes (by
    # parameter count, so quantised alike) scaled by experts_per_tok / experts.
    experts = cfg.get("num_experts") or cfg.get("num_local_experts") or 0
    touched = 1.0
    if experts:
        inter, topk = cfg["moe_intermediate_size"], cfg["num_experts_per_tok"]
        expert_params = L * experts * 3 * h * inter
        attn_params = L * (2 * h * heads * dim + 2 * h * kvh * dim + experts * h)
        linear_params = expert_params + attn_params + cfg["vocab_size"] * h
        touched = 1 - expert_params / linear_params * (1 - topk / experts)
    r = {}
    for name in RUNS:
        if name in ("generate_unfused", "generate_no_pdl", "generate_no_moe_decode") and \
                not os.path.exists(os.path.join(d, name + ".json")):
            continue  # UNFUSED=1, NO_PDL=1, NO_MOE_DECODE=1 only
        g = load(os.path.join(d, name + ".json"))
        r[name] = {k: g.get(k) for k in ("decode_tokens_per_second", "prefill_seconds", "decode_seconds", "finish_reason", "load", "profile", "error")}
    if os.path.exists(os.path.join(d, "throughput.json")):
        t = load(os.path.join(d, "throughput.json"))
        r["batch"] = {k: t.get(k) for k in ("num_prompts", "output_tokens_per_second", "total_tokens_per_second", "ttft", "tpot", "decode", "cuda_graphs", "load", "seconds", "error")}
        tpot = (t.get("tpot") or {}).get("mean_ms")
        # The decode-only steps' tokens/s: what llama-batched-bench's speed_tg times (it processes
        # every prompt before its first decode step).
        if (t.get("decode") or {}).get("tokens_per_second"):
            r["batch"]["decode_only_tokens_per_second"] = t["decode"]["tokens_per_second"]
        # Requests / mean TPOT: the decode phase as the requests saw it, also the steps they
        # decoded in beside others' prompt chunks (the stricter figure).
        if tpot: r["batch"]["decode_tokens_per_second"] = t["num_prompts"] / (tpot / 1e3)
        if os.path.exists(os.path.join(d, "throughput_profile.json")):
            r["batch"]["profile"] = load(os.path.join(d, "throughput_profile.json")).get("profile")
    ckpt_bytes = (r["generate"].get("load") or {}).get("checkpoint_bytes")
    if ckpt_bytes and copy:
        weight_bytes = (ckpt_bytes - cfg["vocab_size"] * h * 2) * touched  # a step reads one embedding row
        r["weight_bytes_per_token"], r["kv_bytes_per_token_mean"] = weight_bytes, kv_bytes
        r["roofline_tokens_per_s"] = roof = copy / (weight_bytes + kv_bytes)
        for name in RUNS:
            tps = r.get(name, {}).get("decode_tokens_per_second")
            if tps: r[name]["fraction_of_roofline"] = tps / roof
    tune = load(os.path.join(d, "tune.json"))
    r["tune"] = tune if "error" in tune else {k: tune.get(k) for k in ("seconds", "failures", "skipped_for_budget")}
    result["formats"][fmt] = r
llama = []
path = os.path.join(out, "llama_bench.jsonl")
for line in open(path) if os.path.exists(path) else []:
    r = json.loads(line)
    llama.append({k: r.get(k) for k in ("model_type", "n_prompt", "n_gen", "avg_ts", "stddev_ts")})
result["llama_cpp"] = llama
path = os.path.join(out, "llama_batched.jsonl")
result["llama_cpp_batched"] = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
print(json.dumps(result, indent=1))
EOF
}

# A cache an earlier session's call exported (device.sh's cache-out, carried back as .tuned/): its
# tuning records and kernels go into this work folder's cache once, so the tunes below resume
# rather than start over (a record is keyed by the GPU, its driver and NVRTC: another device's
# records are simply not found).
seed=$root/.tuned/model-$tag.sqlite.gz
if [ -f "$seed" ] && [ ! -f "$work/cache/.seeded" ]; then
  log "importing the tuned cache $seed"
  mkdir -p "$work/cache"
  gunzip -c "$seed" >"$work/seed.sqlite" &&
    ONECAT_CACHE_DIR=$work/cache "$bin" cache import "$work/seed.sqlite" >&2 && touch "$work/cache/.seeded" ||
    log "cache import failed"
fi

ids=$("$py" -c "import sys; sys.path.insert(0, '$root/bench'); import random_checkpoint as r; print(r.prompt_ids($prompt))")
for fmt in $([ "${ONECAT_RUNS:-1}" = 1 ] && echo "${FORMATS:-f16}"); do
  d=$work/$fmt
  ckpt=$d/checkpoint
  mkdir -p "$d"
  if [ ! -f "$ckpt/config.json" ]; then
    log "random checkpoint $shape $fmt"
    if [ "$fmt" = f16 ]; then
      "$py" "$root/bench/random_checkpoint.py" "$ckpt" --shape "$shape" ${LAYERS:+--layers "$LAYERS"} \
        --vocab-gguf "${VOCAB_GGUF:?the qwen2 vocabulary gguf}" || exit 1
    else
      "$py" "$root/bench/random_checkpoint.py" "$ckpt" --shape "$shape" ${LAYERS:+--layers "$LAYERS"} \
        --random-codes "$fmt" || continue
    fi
  fi
  cp "$ckpt/config.json" "$d/config.json"
  buckets=${TUNE_BUCKETS:-1${BATCH:+,$BATCH}}
  # A tune the timeout cut left no summary: the next call resumes it (the cache keeps its records).
  if ! grep -q '"seconds"' "$d/tune.json" 2>/dev/null; then
    log "tune buckets $buckets ($fmt)"
    ONECAT_CACHE_DIR=$work/cache timeout "${TUNE_S:-300}" "$bin" tune --model "$ckpt" --buckets "$buckets" \
      ${TUNE_FAMILIES:+--families "$TUNE_FAMILIES"} --json >"$d/tune.json" 2>"$d/tune.err" ||
      log "tune failed: $(tail -3 "$d/tune.err")"
  fi
  for run in generate ${UNFUSED:+generate_unfused} ${NO_PDL:+generate_no_pdl} ${NO_MOE_DECODE:+generate_no_moe_decode} \
             generate_eager generate_profile; do
    grep -q decode_tokens_per_second "$d/$run.json" 2>/dev/null && continue  # done in an earlier call
    flags=$([ $run = generate_eager ] && echo --no-cuda-graphs; [ $run = generate_profile ] && echo --profile;
            [ $run = generate_unfused ] && echo --no-fused-norms)
    log "onecat $run ($fmt)"
    pdl=$([ $run = generate_no_pdl ] && echo 0 || echo "${ONECAT_PDL:-1}")
    moe_decode=$([ $run = generate_no_moe_decode ] && echo 0 || echo "${ONECAT_MOE_DECODE:-1}")
    ONECAT_MOE_DECODE=$moe_decode ONECAT_PDL=$pdl ONECAT_CACHE_DIR=$work/cache "$bin" generate --model "$ckpt" --device cuda --prompt-ids "$ids" --max-tokens "$gen" \
      --prefill-chunk 512 --ignore-eos --json $flags >"$d/$run.json" 2>>"$d/generate.err" ||
      log "$run failed: $(tail -3 "$d/generate.err")"
  done
  if [ -n "${BATCH:-}" ] && ! grep -q output_tokens_per_second "$d/throughput.json" 2>/dev/null; then
    log "onecat throughput, $BATCH requests at once ($fmt)"
    ONECAT_CACHE_DIR=$work/cache "$bin" throughput --model "$ckpt" --device cuda --num-prompts "$BATCH" --input-len "$prompt" \
      --output-len "$gen" --max-num-seqs "$BATCH" --max-num-batched-tokens 2048 --json >"$d/throughput.json" 2>>"$d/generate.err" ||
      log "throughput failed: $(tail -3 "$d/generate.err")"
  fi
  if [ -n "${BATCH:-}" ] && ! grep -q decode_kernel_us_per_step "$d/throughput_profile.json" 2>/dev/null; then
    log "onecat throughput --profile, $BATCH requests at once ($fmt): the batched decode step by op"
    ONECAT_CACHE_DIR=$work/cache "$bin" throughput --model "$ckpt" --device cuda --num-prompts "$BATCH" --input-len "$prompt" \
      --output-len 16 --max-num-seqs "$BATCH" --max-num-batched-tokens 2048 --profile --json >"$d/throughput_profile.json" \
      2>>"$d/generate.err" || log "throughput --profile failed: $(tail -3 "$d/generate.err")"
  fi
  summarize
  # The device has 64 GB of disk: a quantised checkpoint goes once measured (f16 stays: llama.cpp
  # converts it and engine-bench runs it).
  [ "$fmt" = f16 ] || [ "${KEEP_CHECKPOINTS:-0}" = 1 ] || rm -rf "$ckpt"
done

if [ "${LLAMA:-0}" = 1 ] && [ -n "${LLAMA_BUILD_LOG:-}" ]; then
  log "waiting for llama.cpp's build"
  until grep -q '^rc=' "$LLAMA_BUILD_LOG" 2>/dev/null; do sleep 5; done
  [ -x "$root/build-llama/cmake/bin/llama-bench" ] || { log "llama.cpp did not build: $(tail -3 "$LLAMA_BUILD_LOG")"; LLAMA=0; }
fi
if [ "${LLAMA:-0}" = 1 ]; then
  log "llama.cpp"
  [ "${LLAMA_APPEND:-0}" = 1 ] || rm -f "$out/llama_bench.jsonl" "$out/llama_batched.jsonl"
  [ -f "$root/build-llama/$tag-f16.gguf" ] ||
    PROMPT=$prompt GEN=$gen OUT=$out bash "$root/bench/llama_peer.sh" "convert:$work/f16/checkpoint:$tag" || log "llama.cpp convert failed"
  for type in ${LLAMA_TYPES:-f16}; do
    [ "$type" = f16 ] || [ -f "$root/build-llama/$tag-$type.gguf" ] || OUT=$out bash "$root/bench/llama_peer.sh" "quantize:$tag:$type" ||
      log "llama.cpp quantize $type failed"
    PROMPT=$prompt GEN=$gen OUT=$out bash "$root/bench/llama_peer.sh" "bench:$tag:$type" || log "llama.cpp bench $type failed"
    [ -z "${BATCH:-}" ] || PROMPT=$prompt GEN=$gen OUT=$out bash "$root/bench/llama_peer.sh" "batched:$tag:$type:$BATCH" ||
      log "llama.cpp batched bench $type failed"
    [ "$type" = f16 ] || [ "${KEEP_CHECKPOINTS:-0}" = 1 ] || rm -f "$root/build-llama/$tag-$type.gguf"
  done
  summarize
fi
cat "$out/model_bench.json"
