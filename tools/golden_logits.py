#!/usr/bin/env python3
"""Golden logits for tests/model_forward_test.cpp: what transformers computes (fp32, eager
attention) for the tiny checkpoints of tools/make_tiny_checkpoint.py, on fixed prompts.

    golden_logits.py --out tests/data/golden            # every case, with transformers (torch)
    golden_logits.py --out DIR --engine numpy            # the same by this file's numpy forward
    golden_logits.py --out DIR --cases llama-f16,qwen3-awq4
    golden_logits.py --out tests/data/golden --update --cases llama-fp8-b32,…   # add cases to a manifest

Each case is a checkpoint the C++ test regenerates with the same make_tiny_checkpoint.py
arguments (recorded in manifest.json; the script is seeded, so the weights are the same bits);
its golden is the logits of some rows of one prompt, float32 [rows][vocab] in <case>.npy.

transformers cannot load most of the quantised formats, and the model onecat runs is the
exact dequantisation anyway, so this script reads the checkpoint's own tensors (safetensors
read by hand: numpy has neither bfloat16 nor float8), dequantises every linear layer with
numpy, and hands transformers an fp32 state dict: bf16 and fp16 values exactly, quantised
weights as codes × scales. Where make_tiny_checkpoint.py also wrote reference.safetensors,
the dequantised weights must equal it bit for bit (a check of both dequantisers).

It also checks transformers against itself: the prompt in one forward vs. in chunks through
its KV cache followed by single-token decode steps (manifest "chunked_max_rel_err"); and,
with --engine transformers, against the numpy forward ("numpy_max_rel_err"), so a
disagreement about the architecture shows here, not as a mystery in the C++ test.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

from make_tiny_checkpoint import CT_FORMATS, moe_experts  # (this file's folder)

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE = os.path.join(HERE, "make_tiny_checkpoint.py")

ARCHS = ["llama", "mistral", "qwen2", "qwen3"]
# Architectures added later: all their formats after every earlier case (no earlier prompt moves).
LATER_ARCHS = ["qwen3moe", "qwen2moe", "mixtral", "phi3"]
FORMATS = ["f16", "bf16", "awq4", "gptq4", "gptq4-act", "fp8", "fp8-channel", "nvfp4", "mxfp4"]
# Formats added later, their cases appended after all others so that no earlier case's index (its
# prompt's seed) moves. fp8-b32-f32 is left out: its weights are fp8-b32's, only the scales'
# container differs.
LATER_FORMATS = ["fp8-b32"]
PROMPT_TOKENS = 1024
# Rows kept: every 64th position and the last few (the late ones are where RoPE errors grow).
ROW_STRIDE, LAST_ROWS = 64, 4
# The chunked run: prefill chunks of these sizes (cycled), the last DECODE_STEPS tokens one at a time.
CHUNKS, DECODE_STEPS = [61, 128, 7], 24


def cases():
    """(name, make_tiny_checkpoint arguments): every architecture × format (Llama with llama3
    RoPE, Qwen2 with q/k/v bias, Qwen3 with q/k norm, head_dim 64 ≠ 256/8 and tied
    embeddings), plus the other RoPE scalings and a sliding window."""
    out = []
    for arch in ARCHS:
        for fmt in FORMATS:
            out.append((f"{arch}-{fmt}", ["--arch", arch, "--format", fmt]))
    out.append(("llama-f16-rope-linear", ["--arch", "llama", "--format", "f16", "--rope", "linear"]))
    out.append(("qwen2-f16-rope-yarn", ["--arch", "qwen2", "--format", "f16", "--rope", "yarn"]))
    out.append(("qwen3-bf16-rope-yarn-v5", ["--arch", "qwen3", "--format", "bf16", "--rope", "yarn-v5"]))
    out.append(("mistral-f16-window-48", ["--arch", "mistral", "--format", "f16", "--sliding-window", "48"]))
    for fmt in LATER_FORMATS:
        for arch in ARCHS:
            out.append((f"{arch}-{fmt}", ["--arch", arch, "--format", fmt]))
    for arch in LATER_ARCHS:
        for fmt in FORMATS + LATER_FORMATS:
            # Qwen2-MoE's routers are decisive (make_tiny_checkpoint.py --decisive-routing): its
            # random ones put a token's 2nd and 3rd experts (softmax weights, not renormalised)
            # within the CPU forward's fp16 rounding of each other, and the fp8 case sat at 0.98
            # of the bound on that flip alone.
            # Mixtral's top-2 likewise (its nvfp4 case flipped a 2nd expert: 1.6x the bound).
            extra = ["--decisive-routing"] if arch in ("qwen2moe", "mixtral") else []
            out.append((f"{arch}-{fmt}", ["--arch", arch, "--format", fmt] + extra))
    out.append(("phi3-f16-window-48", ["--arch", "phi3", "--format", "f16", "--sliding-window", "48"]))
    for arch in ("llama", "qwen3"):  # llm-compressor's compressed-tensors checkpoints
        for fmt in CT_FORMATS:
            out.append((f"{arch}-{fmt}", ["--arch", arch, "--format", fmt]))
    for fmt in ("ct-w4a16", "ct-fp8"):  # RedHatAI's Qwen3-30B-A3B forms: every expert in the library's tensors
        out.append((f"qwen3moe-{fmt}", ["--arch", "qwen3moe", "--format", fmt]))
    # Granite's multipliers, folded into the weights by onecat: the formats whose scales take a factor.
    for fmt in ("f16", "bf16", "awq4", "gptq4-act", "fp8", "fp8-channel", "nvfp4", "ct-w4a16"):
        out.append((f"granite-{fmt}", ["--arch", "granite", "--format", fmt]))
    return out


def prompt_for(index, vocab):
    rng = np.random.default_rng(1000 + index)
    return [int(t) for t in rng.integers(0, vocab, PROMPT_TOKENS)]


def kept_rows(tokens):
    rows = list(range(0, tokens, ROW_STRIDE))
    rows += [r for r in range(tokens - LAST_ROWS, tokens) if r not in rows]
    return rows


# ---------------------------------------------------------------------------------------------
# safetensors, read by hand

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)


def e4m3_values():
    v = np.zeros(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 0xF, c & 7
        mag = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[c] = np.nan if (c & 0x7F) == 0x7F else (-mag if s else mag)
    return v


E4M3 = e4m3_values()
RAW_DTYPES = {"F16": np.float16, "F32": np.float32, "I32": np.int32, "I64": np.int64, "U8": np.uint8, "BF16": np.uint16,
              "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


def read_safetensors(path, f32_names=()):
    """name → float64 array for float dtypes (bf16, e4m3 and e8m0 decoded exactly), raw ints otherwise;
    the fp16, bf16 or fp32 tensors named in f32_names as float32 instead (as exact)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    view = memoryview(data)  # slices without copying; every tensor below is a new array
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = np.frombuffer(view[base + a:base + b], RAW_DTYPES[t["dtype"]]).reshape(t["shape"])
        if name in f32_names and t["dtype"] == "BF16":
            out[name] = (raw.astype(np.uint32) << 16).view(np.float32)
        elif name in f32_names and t["dtype"] in ("F16", "F32"):
            out[name] = raw.astype(np.float32)
        elif t["dtype"] == "BF16":
            out[name] = (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif t["dtype"] == "F8_E4M3":
            out[name] = E4M3[raw]
        elif t["dtype"] == "F8_E8M0":  # UE8M0: 2^(b − 127), 255 the NaN
            out[name] = np.where(raw == 255, np.nan, np.exp2(raw.astype(np.float64) - 127))
        elif t["dtype"] in ("F16", "F32"):
            out[name] = raw.astype(np.float64)
        else:
            out[name] = raw.copy()
    return out


def checkpoint_tensors(directory, f32_names=()):
    tensors = {}
    for file in sorted(os.listdir(directory)):
        if file.endswith(".safetensors") and file != "reference.safetensors":
            tensors.update(read_safetensors(os.path.join(directory, file), f32_names))
    return tensors


# ---------------------------------------------------------------------------------------------
# Dequantisers: a linear layer's tensors → W [N][K] float64, exactly

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble p of an AutoAWQ word holds column 8j + AWQ_ORDER[p]


def nibbles(words, order):
    """int32 [..., J] → [..., 8J] codes: nibble p of word j is element 8j + order[p]."""
    w = words.astype(np.int64) & 0xFFFFFFFF
    out = np.zeros(w.shape[:-1] + (w.shape[-1] * 8,), np.int64)
    for p, col in enumerate(order):
        out[..., col::8] = (w >> (4 * p)) & 0xF
    return out


def low_nibble_first(u8):
    """[..., B] bytes → [..., 2B] codes, the low nibble first."""
    out = np.zeros(u8.shape[:-1] + (u8.shape[-1] * 2,), np.int64)
    out[..., 0::2] = u8 & 0xF
    out[..., 1::2] = u8 >> 4
    return out


def dequantise(t, prefix, method, group):
    has = lambda s: f"{prefix}.{s}" in t  # noqa: E731
    get = lambda s: t[f"{prefix}.{s}"]  # noqa: E731
    if has("weight") and get("weight").dtype == np.float64 and not has("weight_scale_inv") and not has(
            "weight_scale"):
        return get("weight")  # f16 / bf16 / f32, also modules_to_not_convert
    if method == "compressed-tensors":
        return dequantise_ct(t, prefix, group)
    if method == "awq":
        q = nibbles(get("qweight"), AWQ_ORDER)  # [K][N]
        z = nibbles(get("qzeros"), AWQ_ORDER)  # [K/G][N]
        s = get("scales")  # [K/G][N]
        k = q.shape[0]
        g = np.arange(k) // group
        return ((q - z[g]) * s[g]).T
    if method == "gptq":
        qw = get("qweight")  # [K/8][N]: nibble i of row r is k = 8r + i
        q = nibbles(qw.T, list(range(8))).T  # [K][N]
        k, n = q.shape
        g = get("g_idx").astype(np.int64) if has("g_idx") else np.arange(k) // group
        z = nibbles(get("qzeros"), list(range(8))) + 1 if has("qzeros") else np.full((k // group, n), 8)  # v1: z − 1
        s = get("scales")
        return ((q - z[g]) * s[g]).T
    if method in ("fp8", "fbgemm_fp8"):
        w = get("weight")  # decoded E4M3 [N][K]
        n, k = w.shape
        if has("weight_scale_inv"):  # one multiplier per block of `group` × `group` (128 or 32)
            s = get("weight_scale_inv")
            return w * np.repeat(np.repeat(s, group, 0), group, 1)[:n, :k]
        return w * get("weight_scale").reshape(n, 1)
    if method == "modelopt":
        codes = low_nibble_first(get("weight"))  # [N][K]
        n, k = codes.shape
        scales = np.repeat(get("weight_scale"), 16, 1)  # decoded E4M3 [N][K/16] → [N][K]
        return E2M1[codes] * scales * float(get("weight_scale_2"))
    if method == "mxfp4":
        blocks = get("blocks")
        n = blocks.shape[0]
        codes = low_nibble_first(blocks.reshape(n, -1))
        e = np.repeat(get("scales").astype(np.int64) - 127, 32, 1)
        return E2M1[codes] * np.exp2(e.astype(np.float64))
    raise SystemExit(f"{prefix}: cannot dequantise method {method}")


def dequantise_ct(t, prefix, group):
    """llm-compressor's compressed-tensors layouts (the compressed_tensors library's packers): W4A16
    weight_packed [N][K/8] (element k at bits 4·(k % 8), stored q + 8), weight_scale [N][K/G],
    weight_zero_point [N/8][K/G] (packed down the rows, zp + 8), weight_g_idx; FP8 weight with
    weight_scale per channel, tensor or 128×128 block; NVFP4 weight_packed, weight_scale /
    weight_global_scale; MXFP4 weight_packed and UE8M0 weight_scale."""
    get = lambda s: t[f"{prefix}.{s}"]  # noqa: E731
    has = lambda s: f"{prefix}.{s}" in t  # noqa: E731
    if has("weight"):  # FP8
        w = get("weight")
        n, k = w.shape
        s = get("weight_scale")
        if s.size == 1:
            return w * float(s.reshape(-1)[0])
        if s.shape == (n, 1) or s.shape == (n,):
            return w * s.reshape(n, 1)
        return w * np.repeat(np.repeat(s, 128, 0), 128, 1)[:n, :k]
    packed = get("weight_packed")
    if packed.dtype == np.int32:  # W4A16
        q = nibbles(packed, list(range(8))) - 8  # [N][K], signed
        n, k = q.shape
        g = get("weight_g_idx").astype(np.int64) if has("weight_g_idx") else np.arange(k) // group
        zp = nibbles(get("weight_zero_point").T, list(range(8))).T[:n] - 8 if has("weight_zero_point") \
            else np.zeros((n, k // group), np.int64)
        return (q - zp[:, g]) * get("weight_scale")[:, g]
    codes = low_nibble_first(packed)  # FP4 [N][K]
    n, k = codes.shape
    if has("weight_global_scale"):  # NVFP4
        return E2M1[codes] * np.repeat(get("weight_scale"), 16, 1) / float(get("weight_global_scale").reshape(-1)[0])
    e = np.repeat(get("weight_scale").astype(np.int64) - 127, 32, 1)  # MXFP4
    return E2M1[codes] * np.exp2(e.astype(np.float64))


def quant_method(directory, cfg):
    q = cfg.get("quantization_config")
    if q and q["quant_method"] == "compressed-tensors":
        return "compressed-tensors", next(iter(q["config_groups"].values()))["weights"].get("group_size") or 0
    if q:
        # fp8: the square block of weight_scale_inv ([128, 128] or [32, 32]).
        return q["quant_method"].lower(), q.get("group_size", q.get("weight_block_size", [0])[0])
    path = os.path.join(directory, "hf_quant_config.json")
    if os.path.exists(path):
        return "modelopt", 16
    return "none", 0


def is_mixtral(cfg):
    return cfg["architectures"][0] == "MixtralForCausalLM"


def is_phi3(cfg):
    """Phi-3: q|k|v as one qkv_proj and gate|up as one gate_up_proj, in the checkpoint and in transformers."""
    return cfg["architectures"][0] == "Phi3ForCausalLM"


def windows_every_layer(cfg):
    """Architectures whose sliding_window alone windows every layer (transformers' Mistral, Mixtral, Phi3)."""
    return cfg["architectures"][0] in ("MistralForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM")


# Mixtral's published MoE names → the Qwen-style ones this file (and transformers 5) uses.
MIXTRAL_NAMES = {"block_sparse_moe.": "mlp.", ".w1.": ".gate_proj.", ".w3.": ".up_proj.", ".w2.": ".down_proj."}


def checkpoint_name(cfg, name):
    """A Qwen-style MoE tensor name as the checkpoint of this architecture stores it."""
    if not is_mixtral(cfg):
        return name
    for theirs, ours in MIXTRAL_NAMES.items():
        name = name.replace(ours, theirs)
    return name


def state_dict(directory, cfg, f32_names=()):
    """The fp64 weights transformers' module names expect (tied: lm_head = the embeddings).
    MoE tensors get Qwen's names whatever the architecture stores (Mixtral: block_sparse_moe,
    w1/w3/w2), as transformers 5 renames them on load. The dense tensors named in f32_names come
    as float32, the same values: for a reference that runs in fp32 anyway (bench/model_check.py),
    whose 8B shapes' embeddings and lm_head are 1.2 G elements to widen to float64 otherwise."""
    t = checkpoint_tensors(directory, f32_names)
    method, group = quant_method(directory, cfg)
    sd = {}
    for name, v in t.items():  # norms, biases, embeddings, lm_head if stored dense
        if v.dtype in (np.float64, np.float32) and (name.endswith("norm.weight") or name.endswith(".bias")
                                      or name in ("model.embed_tokens.weight", "lm_head.weight")):
            sd[name] = v
    for i in range(cfg["num_hidden_layers"]):
        projs = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
        if is_phi3(cfg):
            projs = ["self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"]
        elif moe_experts(cfg):  # the router, then every expert's three
            projs += ["mlp.gate"] + [f"mlp.experts.{e}.{p}" for e in range(moe_experts(cfg))
                                     for p in ("gate_proj", "up_proj", "down_proj")]
            if "shared_expert_intermediate_size" in cfg:  # Qwen2-MoE's shared expert and its gate
                projs += [f"mlp.shared_expert.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
                projs += ["mlp.shared_expert_gate"]
        else:
            projs += ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
        for proj in projs:
            prefix = f"model.layers.{i}.{proj}"
            sd[prefix + ".weight"] = dequantise(t, checkpoint_name(cfg, prefix + ".")[:-1], method, group)
    if cfg.get("tie_word_embeddings"):
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    elif "lm_head.weight" not in sd:
        sd["lm_head.weight"] = dequantise(t, "lm_head", method, group)
    reference = os.path.join(directory, "reference.safetensors")
    if os.path.exists(reference) and cfg.get("torch_dtype") != "bfloat16":
        # make_tiny_checkpoint.py's own exact dequantisation (its norms are fp16 already; bf16
        # checkpoints' reference holds the fp16 rounding onecat loads, so only linears compare).
        ref = read_safetensors(reference)
        ours = {checkpoint_name(cfg, name): name for name in sd}
        for name, v in ref.items():
            if name not in ours or not (ours[name].endswith("proj.weight") or ours[name].endswith("mlp.gate.weight")):
                continue
            name = ours[name]
            if not np.array_equal(sd[name].astype(np.float32), v.astype(np.float32)):
                raise SystemExit(f"{directory}: {name} dequantises differently here and in make_tiny_checkpoint.py")
    return sd


# ---------------------------------------------------------------------------------------------
# RoPE as transformers computes it (fp32 inverse frequencies)


def rope_params(cfg):
    """(type, fields, theta) as transformers 5 standardises them: rope_scaling when non-empty,
    else rope_parameters; the dict's rope_theta over the top-level one; llama3 and yarn take a
    top-level original_max_position_embeddings, then the dict's, then max_position_embeddings."""
    p = dict(cfg.get("rope_scaling") or cfg.get("rope_parameters") or {})
    kind = p.get("rope_type", p.get("type", "default"))
    if kind in ("llama3", "yarn"):
        p["original_max_position_embeddings"] = (cfg.get("original_max_position_embeddings")
                                                 or p.get("original_max_position_embeddings")
                                                 or cfg["max_position_embeddings"])
    default = 1e6 if is_mixtral(cfg) else 10000.0  # transformers' config defaults
    return kind, p, p.get("rope_theta", cfg.get("rope_theta", default))


def inv_freq_and_scale(cfg, dim):
    kind, p, base = rope_params(cfg)
    exponents = (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim))
    inv = (1.0 / (np.float32(base) ** exponents)).astype(np.float32)
    if kind == "default":
        return inv, 1.0
    if kind == "linear":
        return (inv / np.float32(p["factor"])).astype(np.float32), 1.0
    if kind == "llama3":
        factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        old = p["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return np.where(medium, smoothed, scaled).astype(np.float32), 1.0
    if kind == "yarn":
        original = p["original_max_position_embeddings"]
        factor = p.get("factor") or cfg["max_position_embeddings"] / original

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        attention = p.get("attention_factor")
        if attention is None:
            if p.get("mscale") and p.get("mscale_all_dim"):
                attention = mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"])
            else:
                attention = mscale(factor)
        beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

        def correction_dim(rotations):
            return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

        lo, hi = correction_dim(beta_fast), correction_dim(beta_slow)
        if p.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - lo) / (hi - lo), 0, 1).astype(np.float32)
        extrapolation = 1 - ramp
        pos = np.float32(base) ** exponents
        interp, extrap = 1.0 / (np.float32(factor) * pos), 1.0 / pos
        return (interp * (1 - extrapolation) + extrap * extrapolation).astype(np.float32), float(attention)
    raise SystemExit(f"rope type {kind} is not one this script knows")


# ---------------------------------------------------------------------------------------------
# A numpy forward (fp64): the same architecture, for machines without torch and as a check


def numpy_moe(cfg, sd, p, h):
    """Qwen3-MoE's sparse block: softmax over the router's logits, the top experts (ties: the
    lower id, as a stable sort gives), renormalised if norm_topk_prob, their MLPs weighted;
    Qwen2-MoE adds its shared expert times the sigmoid of its gate."""
    logits = h @ sd[p + "mlp.gate.weight"].T
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    top = cfg["num_experts_per_tok"]
    renormalise = cfg.get("norm_topk_prob") or is_mixtral(cfg)  # Mixtral always renormalises
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        chosen = np.argsort(-probs[t], kind="stable")[:top]
        w = probs[t, chosen]
        if renormalise:
            w = w / w.sum()
        for e, we in zip(chosen, w):
            q = p + f"mlp.experts.{e}."
            gate, up = h[t] @ sd[q + "gate_proj.weight"].T, h[t] @ sd[q + "up_proj.weight"].T
            out[t] += we * ((gate / (1 + np.exp(-gate)) * up) @ sd[q + "down_proj.weight"].T)
    if "shared_expert_intermediate_size" in cfg:  # Qwen2-MoE: + sigmoid(gate) · the shared expert
        q = p + "mlp.shared_expert."
        gate, up = h @ sd[q + "gate_proj.weight"].T, h @ sd[q + "up_proj.weight"].T
        shared = (gate / (1 + np.exp(-gate)) * up) @ sd[q + "down_proj.weight"].T
        out += shared / (1 + np.exp(-(h @ sd[p + "mlp.shared_expert_gate.weight"].T)))
    return out


def numpy_logits(cfg, sd, ids):
    hidden, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dim = cfg.get("head_dim") or hidden // heads
    eps = cfg["rms_norm_eps"]
    qwen3 = cfg["architectures"][0] in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
    window = cfg.get("sliding_window") if windows_every_layer(cfg) else None
    if is_phi3(cfg):  # the fused projections split into the parts this forward reads
        sd = dict(sd)
        q_rows, kv_rows, inter = heads * dim, kv * dim, cfg["intermediate_size"]
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            qkv, gate_up = sd[p + "self_attn.qkv_proj.weight"], sd[p + "mlp.gate_up_proj.weight"]
            sd[p + "self_attn.q_proj.weight"] = qkv[:q_rows]
            sd[p + "self_attn.k_proj.weight"] = qkv[q_rows:q_rows + kv_rows]
            sd[p + "self_attn.v_proj.weight"] = qkv[q_rows + kv_rows:]
            sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"] = gate_up[:inter], gate_up[inter:]
    t = len(ids)
    inv, scale = inv_freq_and_scale(cfg, dim)
    angles = (np.arange(t, dtype=np.float32)[:, None] * inv[None, :]).astype(np.float32)
    emb = np.concatenate([angles, angles], axis=1)
    cos, sin = np.cos(emb).astype(np.float64) * scale, np.sin(emb).astype(np.float64) * scale

    def norm(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rotate(x):  # [t][h][dim]
        half = dim // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos[:, None, :] + rotated * sin[:, None, :]

    mask = np.tril(np.ones((t, t), bool))
    if window:
        mask &= ~np.tril(np.ones((t, t), bool), -window)
    # Granite's multipliers (transformers' GraniteForCausalLM); 1 and 1/√dim elsewhere.
    granite = cfg["architectures"][0] == "GraniteForCausalLM"
    em, rm = (cfg.get("embedding_multiplier", 1.0), cfg.get("residual_multiplier", 1.0)) if granite else (1.0, 1.0)
    ls = cfg.get("logits_scaling", 1.0) if granite else 1.0
    score_scale = cfg.get("attention_multiplier", 1.0) if granite else 1 / math.sqrt(dim)
    x = sd["model.embed_tokens.weight"][ids] * em
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = norm(x, sd[p + "input_layernorm.weight"])

        def proj(name):
            y = h @ sd[p + f"self_attn.{name}.weight"].T
            return y + sd[p + f"self_attn.{name}.bias"] if p + f"self_attn.{name}.bias" in sd else y

        q = proj("q_proj").reshape(t, heads, dim)
        k = proj("k_proj").reshape(t, kv, dim)
        v = proj("v_proj").reshape(t, kv, dim)
        if qwen3:
            q, k = norm(q, sd[p + "self_attn.q_norm.weight"]), norm(k, sd[p + "self_attn.k_norm.weight"])
        q, k = rotate(q), rotate(k)
        group = heads // kv
        out = np.zeros((t, heads, dim))
        for hd in range(heads):
            s = q[:, hd] @ k[:, hd // group].T * score_scale
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, hd] = (s / s.sum(-1, keepdims=True)) @ v[:, hd // group]
        o = out.reshape(t, heads * dim) @ sd[p + "self_attn.o_proj.weight"].T
        if p + "self_attn.o_proj.bias" in sd:
            o = o + sd[p + "self_attn.o_proj.bias"]
        x = x + o * rm
        h = norm(x, sd[p + "post_attention_layernorm.weight"])
        if moe_experts(cfg):
            x = x + numpy_moe(cfg, sd, p, h)
            continue
        gate, up = h @ sd[p + "mlp.gate_proj.weight"].T, h @ sd[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ sd[p + "mlp.down_proj.weight"].T * rm
    return (norm(x, sd["model.norm.weight"]) @ sd["lm_head.weight"].T / ls).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# transformers


def transformers_model(directory, cfg, sd):
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(directory)
    if getattr(config, "quantization_config", None) is not None:
        delattr(config, "quantization_config")  # the weights given are already dequantised
    # Every parameter is loaded below (a missing one is an error), so random initialisation only
    # costs time: ~30 s on two cores for an 8B shape's embeddings. Every golden case's logits are
    # bit-identical with and without it (transformers 5.17, CPU).
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    with no_init_weights():
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                                  attn_implementation="eager")
        except TypeError:  # transformers 4 names it torch_dtype
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32,
                                                                  attn_implementation="eager")
    model = model.float()
    sd = fused_experts(model, cfg, sd)
    result = model.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) for k, v in sd.items()}, strict=False)
    # Tied models may or may not list lm_head.weight; anything else missing or left over is a bug.
    missing = [k for k in result.missing_keys if not (k == "lm_head.weight" and cfg.get("tie_word_embeddings"))]
    unexpected = [k for k in result.unexpected_keys if not (k == "lm_head.weight" and cfg.get("tie_word_embeddings"))]
    if missing or unexpected:
        raise SystemExit(f"{directory}: state dict mismatch, missing {missing}, unexpected {unexpected}")
    if not torch.equal(model.get_output_embeddings().weight, torch.from_numpy(sd["lm_head.weight"].astype(np.float32))):
        raise SystemExit(f"{directory}: lm_head is not what the checkpoint says (tied: the embeddings)")
    return model.eval()


def fused_experts(model, cfg, sd):
    """transformers 5 keeps a MoE layer's experts as two 3-D parameters, gate_up_proj
    [experts][2·intermediate][hidden] (gate rows first) and down_proj [experts][hidden]
    [intermediate], and renames the per-expert tensors of the files on load (and back on save):
    the same here for load_state_dict."""
    keys = set(model.state_dict())
    if not moe_experts(cfg) or "model.layers.0.mlp.experts.gate_up_proj" not in keys:
        return sd
    sd = dict(sd)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.mlp.experts."
        e = range(moe_experts(cfg))
        gate = [sd.pop(f"{p}{x}.gate_proj.weight") for x in e]
        up = [sd.pop(f"{p}{x}.up_proj.weight") for x in e]
        sd[p + "gate_up_proj"] = np.stack([np.concatenate([g, u], 0) for g, u in zip(gate, up)])
        sd[p + "down_proj"] = np.stack([sd.pop(f"{p}{x}.down_proj.weight") for x in e])
    return sd


def transformers_logits(model, ids):
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float().numpy()


def transformers_chunked(model, ids):
    """The prompt through the KV cache: prefill chunks, then single-token decode steps."""
    import torch
    from transformers import DynamicCache

    cache, rows, at, c = DynamicCache(), [], 0, 0
    prefill_end = len(ids) - DECODE_STEPS
    with torch.no_grad():
        while at < len(ids):
            n = min(CHUNKS[c % len(CHUNKS)], prefill_end - at) if at < prefill_end else 1
            c += 1
            out = model(input_ids=torch.tensor([ids[at:at + n]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0].float().numpy())
            at += n
    return np.concatenate(rows)


def max_rel_err(got, want):
    """max over rows of max |Δ| / (max − min of the wanted row): the C++ test's first metric."""
    spread = want.max(-1) - want.min(-1)
    return float((np.abs(got - want).max(-1) / spread).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for manifest.json and the .npy files")
    ap.add_argument("--engine", choices=["transformers", "numpy"], default="transformers")
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs make_tiny_checkpoint.py")
    ap.add_argument("--update", action="store_true",
                    help="keep the cases of OUT/manifest.json that this run does not compute (same engine and "
                         "versions only), replacing those it does")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    wanted = set(a.cases.split(",")) if a.cases else None
    manifest = {"engine": a.engine, "prompt_tokens": PROMPT_TOKENS, "cases": []}
    if a.engine == "transformers":
        import torch
        import transformers

        manifest["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
        torch.manual_seed(0)
    kept, case_versions = [], None
    if a.update and os.path.exists(os.path.join(a.out, "manifest.json")):
        old = json.load(open(os.path.join(a.out, "manifest.json")))
        for key in ("engine", "prompt_tokens"):
            if old.get(key) != manifest.get(key):
                raise SystemExit(f"--update: {a.out}/manifest.json has {key} {old.get(key)}, this run "
                                 f"{manifest.get(key)}; regenerate every case instead")
        kept = [c for c in old["cases"] if not (wanted is None or c["name"] in wanted)]
        if old.get("versions") != manifest.get("versions"):
            # Cases computed by other versions than the manifest's carry their own.
            case_versions, manifest["versions"] = manifest.get("versions"), old.get("versions")
            print(f"--update: this run's versions {case_versions} differ from the manifest's; its cases record them",
                  file=sys.stderr)
    for index, (name, args) in enumerate(cases()):
        if wanted and name not in wanted:
            continue
        if a.engine == "transformers" and "yarn-v5" in name and int(transformers.__version__.split(".")[0]) < 5:
            print(f"{name}: skipped, rope_parameters needs transformers 5", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([a.python, MAKE, tmp] + args, check=True)
            cfg = json.load(open(os.path.join(tmp, "config.json")))
            sd = state_dict(tmp, cfg)
            ids = prompt_for(index, cfg["vocab_size"])
            entry = {"name": name, "args": args, "prompt": ids}
            if case_versions:
                entry["versions"] = case_versions
            reference = numpy_logits(cfg, sd, ids)
            if a.engine == "transformers":
                model = transformers_model(tmp, cfg, sd)
                logits = transformers_logits(model, ids)
                entry["numpy_max_rel_err"] = max_rel_err(reference, logits)
                entry["chunked_max_rel_err"] = max_rel_err(transformers_chunked(model, ids), logits)
                # Both are fp32-vs-fp64 and fp32-vs-fp32 differences, ~1e-6; more means the
                # numpy forward and transformers disagree about the model (the golden is still
                # transformers': the C++ test will say whether onecat agrees with it).
                for key, bound in (("numpy_max_rel_err", 1e-4), ("chunked_max_rel_err", 1e-4)):
                    if entry[key] > bound:
                        print(f"WARNING {name}: {key} {entry[key]:.2e} > {bound:g}", file=sys.stderr)
            else:
                logits = reference
        rows = kept_rows(len(ids))
        entry["rows"] = rows
        entry["file"] = name + ".npy"
        np.save(os.path.join(a.out, entry["file"]), np.ascontiguousarray(logits[rows], np.float32))
        manifest["cases"].append(entry)
        print(f"{name}: {len(rows)} rows" + "".join(f", {k} {entry[k]:.2e}" for k in
                                                     ("numpy_max_rel_err", "chunked_max_rel_err") if k in entry),
              file=sys.stderr)
    # In cases() order, whichever run computed them.
    order = {name: i for i, (name, _) in enumerate(cases())}
    manifest["cases"] = sorted(kept + manifest["cases"], key=lambda c: order.get(c["name"], len(order)))
    # One case per line: the prompts are long.
    head = {k: v for k, v in manifest.items() if k != "cases"}
    text = json.dumps(head)[:-1] + ', "cases": [\n' + ",\n".join(json.dumps(c) for c in manifest["cases"]) + "\n]}\n"
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
