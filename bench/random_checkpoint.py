#!/usr/bin/env python3
"""Writes a random-weight Hugging Face checkpoint of a real model shape with transformers'
own save_pretrained (sharded safetensors, config.json), plus a real tokenizer (Qwen2's BPE
vocabulary from the llama-cpp-python sdist's ggml-vocab-qwen2.gguf, turned into tokenizer.json
by tools/gguf_to_tokenizer_json.py) so llama.cpp's convert_hf_to_gguf.py accepts it.
Device-side (needs torch and transformers); the speed benchmarks' common model.

    bench/random_checkpoint.py --shape qwen3-8b --dtype float16 --vocab-gguf PATH OUT_DIR

With --random-codes FORMAT it writes the same shape as random codes in FORMAT's real layout
instead (tools/make_tiny_checkpoint.py, no torch; the lm_head and embeddings stay fp16, as
published checkpoints have them): speed only, no tokenizer.

prompt_ids(n) is the benchmarks' prompt (bench/model_bench.sh, bench/before_after.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import time

SHAPES = {
    # The public config.json fields that fix the shape (weights random).
    "qwen3-8b": dict(arch="Qwen3ForCausalLM", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                     max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                     tie_word_embeddings=False),
    "qwen3-1.7b": dict(arch="Qwen3ForCausalLM", hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
    # Qwen3-30B-A3B: 128 experts of 768, 8 per token, renormalised (48 layers: --layers for fewer).
    "qwen3-30b-a3b": dict(arch="Qwen3MoeForCausalLM", hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
                          num_attention_heads=32, num_key_value_heads=4, head_dim=128, vocab_size=151936,
                          max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                          tie_word_embeddings=False, num_experts=128, num_experts_per_tok=8,
                          moe_intermediate_size=768, norm_topk_prob=True, decoder_sparse_step=1,
                          mlp_only_layers=[]),
}


def prompt_ids(n):
    """n token ids, the same for every run: comma separated."""
    import random

    r = random.Random(0)
    return ",".join(str(r.randrange(1000, 150000)) for _ in range(n))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-8b")
    ap.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    ap.add_argument("--layers", type=int, help="fewer layers than the real model (quick checks)")
    ap.add_argument("--vocab-gguf", help="ggml-vocab-qwen2.gguf from the pinned sdist (not with --random-codes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-codes", metavar="FORMAT", help="random codes in FORMAT's layout (awq4, fp8, nvfp4, ...)")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))

    if args.random_codes:
        fields = dict(SHAPES[args.shape])
        arch = "qwen3moe" if "Moe" in fields.pop("arch") else "qwen3"
        if args.layers:
            fields["num_hidden_layers"] = args.layers
        subprocess.run([sys.executable, os.path.join(here, "..", "tools", "make_tiny_checkpoint.py"), args.out,
                        "--arch", arch, "--format", args.random_codes, "--random-codes", "--shape", json.dumps(fields)],
                       check=True)
        return
    if not args.vocab_gguf:
        ap.error("--vocab-gguf is required (the checkpoint's tokenizer)")

    import torch
    import transformers

    fields = dict(SHAPES[args.shape])
    arch = fields.pop("arch")
    if args.layers:
        fields["num_hidden_layers"] = args.layers
    config_class = getattr(transformers, arch.replace("ForCausalLM", "Config"))
    config = config_class(**fields)
    config.architectures = [arch]
    torch.manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    t0 = time.time()
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = getattr(transformers, arch)(config).to(dtype)
    t1 = time.time()
    model.save_pretrained(args.out, max_shard_size="5GB")
    t2 = time.time()
    subprocess.run([sys.executable, os.path.join(here, "..", "tools", "gguf_to_tokenizer_json.py"), args.vocab_gguf,
                    args.out], check=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"random_checkpoint: {args.shape} {args.dtype} {params / 1e9:.2f} B parameters: init {t1 - t0:.1f} s, "
          f"save {t2 - t1:.1f} s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
