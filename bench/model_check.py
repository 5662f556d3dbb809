#!/usr/bin/env python3
"""onecat's GPU forward pass against transformers on real model shapes (device-side).

For each case: a random checkpoint written by tools/make_tiny_checkpoint.py with a real
model's dimensions (hidden, heads, KV heads, head_dim, intermediate, vocabulary) and a few
layers (the layer count changes no kernel shape), in one checkpoint format; transformers runs
the exact dequantisation of its weights in fp32 on the GPU (TF32 off) — tools/golden_logits.py's
loader — and onecat.Model(device="cuda") runs the checkpoint itself. Both see the same prompt;
logits are compared on every row by

  rel   = max |Δlogit| / (max − min of the reference row)   (scale-free, worst element)
  kl    = KL(softmax(ref) ‖ softmax(onecat)), mean and max over rows
  top1  = share of rows whose argmax agrees

and the same is done for a model whose config lies about one thing (rope_theta · 1.01, given to
onecat only) to show the metric would catch it. A case passes when rel ≤ --rel-bound and the
mean KL ≤ --kl-bound (the goldens' 2e-3 and 1e-3) and the lying model fails one of them. One
JSON line per case on stdout.

    bench/model_check.py [--cases qwen3-8b:f16,...] [--tokens 1024] [--layers 2] [--decode-tail 16]

The prompt's first tokens - decode_tail go through chunked prefill (512 tokens a step), the last
decode_tail through one decode step each, so both paths are compared.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import golden_logits as gl  # noqa: E402

SHAPES = {
    # config.json fields (make_tiny_checkpoint.py --shape overrides them).
    "llama-3.1-8b": ("llama", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                   num_key_value_heads=8, head_dim=128, vocab_size=128256)),
    "qwen2.5-7b": ("qwen2", dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                                 num_key_value_heads=4, head_dim=128, vocab_size=152064)),
    "qwen3-8b": ("qwen3", dict(hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                               num_key_value_heads=8, head_dim=128, vocab_size=151936)),
    # Mixtral-8x7B: 8 experts of 14336 per layer (2.8 GB of fp16 a layer), 2 per token.
    "mixtral-8x7b": ("mixtral", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                     num_key_value_heads=8, head_dim=128, vocab_size=32000)),
}
DEFAULT_CASES = ("llama-3.1-8b:f16,qwen2.5-7b:bf16,qwen3-8b:f16,qwen3-8b:awq4,qwen3-8b:gptq4-act,"
                 "qwen3-8b:fp8,qwen3-8b:nvfp4,qwen3-8b:mxfp4")


def metrics(got, want):
    spread = want.max(-1) - want.min(-1)
    rel = float((np.abs(got - want).max(-1) / spread).max())

    def log_softmax(x):
        x = x.astype(np.float64)
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    lp, lq = log_softmax(want), log_softmax(got)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    top1 = float((got.argmax(-1) == want.argmax(-1)).mean())
    return {"rel": rel, "kl_mean": float(kl.mean()), "kl_max": float(kl.max()), "top1": top1}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--decode-tail", type=int, default=16,
                    help="the last N tokens go through one decode step each after the chunked prefill of the rest")
    # The goldens' bounds (tests/model_forward_test.cpp): on the H200 (2026-12-02, 2 layers of
    # Qwen3-8B's shape, 1024 tokens) fp16 onecat against fp32 transformers gave rel 4.4e-4 and
    # mean KL 6.3e-5, and rope_theta · 1.01 gave 1.0e-2 and 8.3e-3: both bounds sit between.
    ap.add_argument("--rel-bound", type=float, default=2e-3)
    ap.add_argument("--kl-bound", type=float, default=1e-3, help="bound on the mean KL over rows")
    args = ap.parse_args()

    import torch
    import onecat

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    work = tempfile.mkdtemp(prefix="model_check-")
    failed = 0
    cases = args.cases.split(",")

    def write(case):
        name, fmt = case.split(":")
        arch, dims = SHAPES[name]
        shape = dict(dims, num_hidden_layers=args.layers)
        d = os.path.join(work, f"{name}-{fmt}")
        t = time.time()
        # MoE: decisive routers (make_tiny_checkpoint.py --decisive-routing), so that fp16 and fp32
        # never part at a near tie between a token's k-th and (k+1)-th experts.
        moe = ["--decisive-routing"] if arch in ("qwen3moe", "qwen2moe", "mixtral") else []
        subprocess.run([sys.executable, gl.MAKE, d, "--arch", arch, "--format", fmt, "--shape", json.dumps(shape)] + moe,
                       check=True, stdout=subprocess.DEVNULL)
        return d, time.time() - t

    # The checkpoints are written on the CPU while the GPU runs earlier cases (each a few GB at a
    # real shape's vocabulary: at most three exist at once).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    jobs = [pool.submit(write, case) for case in cases[:2]]
    for i, case in enumerate(cases):
        if i + 2 < len(cases):
            jobs.append(pool.submit(write, cases[i + 2]))
        name, fmt = case.split(":")
        arch, dims = SHAPES[name]
        t0 = time.time()
        d, write_s = jobs[i].result()
        cfg = json.load(open(os.path.join(d, "config.json")))
        rng = np.random.default_rng(7)
        if cfg["vocab_size"] != dims["vocab_size"] or cfg["hidden_size"] != dims["hidden_size"]:
            raise SystemExit(f"{d}: the checkpoint's shape is not {name}'s")
        ids = [int(t) for t in rng.integers(0, cfg["vocab_size"], args.tokens)]
        sd = gl.state_dict(d, cfg, f32_names=("model.embed_tokens.weight", "lm_head.weight"))
        ref_model = gl.transformers_model(d, cfg, sd).cuda()
        with torch.no_grad():
            want = ref_model(input_ids=torch.tensor([ids], device="cuda")).logits[0].float().cpu().numpy()
        # The θ transformers ran with (the tiny checkpoints leave it to the architecture's default).
        rope = getattr(ref_model.config, "rope_parameters", None)
        theta = (rope or {}).get("rope_theta") if isinstance(rope, dict) else None
        theta = theta or getattr(ref_model.config, "rope_theta", None)
        if not theta:
            raise SystemExit(f"{d}: cannot read the rope_theta transformers used")
        del ref_model, sd
        torch.cuda.empty_cache()
        t1 = time.time()
        m = onecat.Model(d, device="cuda", max_batch_tokens=min(args.tokens, 512), kv_cache_tokens=args.tokens + 64)
        got = m.logits(ids, decode_tail=args.decode_tail)
        del m
        t2 = time.time()
        tail = slice(args.tokens - args.decode_tail, args.tokens)
        result = {"case": case, "tokens": args.tokens, "layers": args.layers, "decode_tail": args.decode_tail,
                  **metrics(got, want), "decode_rows": metrics(got[tail], want[tail]),
                  "write_s": round(write_s, 1), "reference_s": round(t1 - t0, 1), "onecat_s": round(t2 - t1, 1)}
        # Power: the same checkpoint with rope_theta off by 1 % must fail the bound.
        bad = d + "-theta"
        os.mkdir(bad)
        for f in os.listdir(d):  # the same tensors: only config.json differs
            if f != "config.json":
                os.symlink(os.path.join(d, f), os.path.join(bad, f))
        cfg_bad = json.loads(json.dumps(cfg))
        changed = 0
        for fields in (cfg_bad, cfg_bad.get("rope_parameters") or {}, cfg_bad.get("rope_scaling") or {}):
            if "rope_theta" in fields:
                fields["rope_theta"] *= 1.01
                changed += 1
        if not changed:
            cfg_bad["rope_theta"] = theta * 1.01
        json.dump(cfg_bad, open(os.path.join(bad, "config.json"), "w"))
        m = onecat.Model(bad, device="cuda", max_batch_tokens=min(args.tokens, 512), kv_cache_tokens=args.tokens + 64)
        result["theta_1pct"] = metrics(m.logits(ids, decode_tail=args.decode_tail), want)
        del m
        shutil.rmtree(bad)
        ok = lambda m: m["rel"] <= args.rel_bound and m["kl_mean"] <= args.kl_bound  # noqa: E731
        result["pass"] = ok(result) and not ok(result["theta_1pct"])
        failed += not result["pass"]
        print(json.dumps(result), flush=True)
        shutil.rmtree(d)
    pool.shutdown()
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
