#!/usr/bin/env python3
"""Tiny Hugging Face checkpoints for tests/checkpoint_test.cpp: random weights, real tensor
names and config.json, written in each published weight format (quantised here in numpy).

    make_tiny_checkpoint.py OUT [--arch llama|mistral|qwen2|qwen3|qwen3moe|qwen2moe|mixtral|phi3] [--format FMT] [--shards N]
                            [--rope default|linear|llama3|yarn|yarn-v5] [--sliding-window N] [--tokenizer [--chat-template]]
    make_tiny_checkpoint.py OUT --all        # every arch × format, and the bad checkpoints

Formats: f16 bf16 awq4 gptq4 gptq4-act fp8 (block 128) fp8-channel (FBGEMM) fp8-b32 (32×32 blocks, UE8M0
scales as F8_E8M0 bytes) fp8-b32-f32 (the same scales as F32 powers of two) nvfp4 mxfp4. Beside the checkpoint, reference.safetensors
holds, as F32, every tensor the loader should produce before fusion: each linear's exact
dequantised weight [N][K] (original column order) under "<prefix>.weight", and every norm, bias
and embedding after rounding to fp16. Needs numpy only; safetensors files are written by hand
here because numpy has neither bfloat16 nor float8.

The weights depend only on (arch, format, seed): the golden logits of tests/data/golden/
(tools/golden_logits.py) were computed from checkpoints this script writes, so changing how it
draws them means recomputing those. --rope, --sliding-window, --tokenizer and --chat-template change
config.json and the files beside the weights, never the weights.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# Rotary embeddings as config.json gives them. "yarn" keeps factor = max_position_embeddings /
# original_max_position_embeddings (4096 / 1024), so transformers versions that take the factor
# from that ratio (before huggingface/transformers#40320) and those that read it agree.
# "yarn-v5" is the same in transformers 5's rope_parameters form.
ROPES = {
    "default": {},
    "linear": {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    # Llama 3.1's own values: with head_dim 64 and theta 5e5 some frequencies are kept, some
    # interpolated and some divided by the factor.
    "llama3": {"rope_theta": 500000.0,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}},
    "yarn": {"rope_theta": 100000.0,
             "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}},
    "yarn-v5": {"rope_parameters": {"rope_type": "yarn", "rope_theta": 100000.0, "factor": 4.0,
                                    "original_max_position_embeddings": 1024}},
}

ARCHS = {
    # hidden 256, q rows 256 or 512 and kv rows 128: every fused part is whole 128-row fp8 blocks.
    "llama": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=256, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=256, tie_word_embeddings=False, **ROPES["llama3"]),
    "mistral": dict(architectures=["MistralForCausalLM"], model_type="mistral", hidden_size=256,
                    num_attention_heads=4, num_key_value_heads=2, intermediate_size=256, sliding_window=None,
                    tie_word_embeddings=False),
    "qwen2": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=256, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=256, tie_word_embeddings=False),
    # head_dim 64 ≠ hidden / heads = 32; tied embeddings like the small Qwen3 models.
    "qwen3": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=256, num_attention_heads=8,
                  num_key_value_heads=2, head_dim=64, intermediate_size=256, tie_word_embeddings=True),
    # Qwen3-MoE: every layer sparse, 8 experts of intermediate 128 (one fp8 block, two int4 groups),
    # 3 per token (odd, so no pairing hides a bug), renormalised; untied embeddings like the
    # published 30B-A3B. intermediate_size (the dense MLP's) is unused: no mlp_only_layers.
    "qwen3moe": dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=256,
                     num_attention_heads=8, num_key_value_heads=2, head_dim=64, intermediate_size=384,
                     moe_intermediate_size=128, num_experts=8, num_experts_per_tok=3, norm_topk_prob=True,
                     decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False),
    # Qwen2-MoE (Qwen1.5-MoE): q/k/v biases, 8 experts of 128, 2 per token, not renormalised (the
    # published default), and a shared expert of intermediate 256 behind a sigmoid gate.
    "qwen2moe": dict(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", hidden_size=256,
                     num_attention_heads=4, num_key_value_heads=2, intermediate_size=384, moe_intermediate_size=128,
                     shared_expert_intermediate_size=256, num_experts=8, num_experts_per_tok=2,
                     norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[], qkv_bias=True,
                     tie_word_embeddings=False),
    # Mixtral: Mistral's attention, every layer 8 experts of intermediate_size 128, 2 per token,
    # renormalised (always, no flag), no shared expert; tensors under block_sparse_moe, the
    # experts' as w1 (gate), w3 (up) and w2 (down), as Mistral publishes them.
    "mixtral": dict(architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_size=256,
                    num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, num_local_experts=8,
                    num_experts_per_tok=2, sliding_window=None, tie_word_embeddings=False),
    # Phi-3 (Phi-4's architecture): q|k|v published as one qkv_proj and gate|up as one
    # gate_up_proj, each quantised as one linear; no biases; Phi-4's θ.
    "phi3": dict(architectures=["Phi3ForCausalLM"], model_type="phi3", hidden_size=256, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=256, rope_theta=250000.0, sliding_window=None,
                 original_max_position_embeddings=4096, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                 pad_token_id=None),  # inside the tiny vocabulary (Phi3Config's defaults are 32000)
    # Granite (IBM Granite 3.x): Llama's tensors, tied embeddings, and the four multipliers at
    # granite-3.x-2b's values but attention_multiplier 1/head_dim as every Granite 3 has it.
    "granite": dict(architectures=["GraniteForCausalLM"], model_type="granite", hidden_size=256, num_attention_heads=4,
                    num_key_value_heads=2, intermediate_size=256, tie_word_embeddings=True, rope_theta=10000000.0,
                    embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.015625,
                    logits_scaling=8.0, attention_bias=False, mlp_bias=False),
}
# Architectures whose q|k|v and gate|up are single tensors in the checkpoint.
FUSED_PROJECTIONS = ("phi3",)
FORMATS = ["f16", "bf16", "awq4", "gptq4", "gptq4-act", "fp8", "fp8-channel", "fp8-b32", "fp8-b32-f32", "nvfp4", "mxfp4"]
# llm-compressor's compressed-tensors checkpoints (quant_method "compressed-tensors").
CT_FORMATS = ["ct-w4a16", "ct-w4a16-asym", "ct-w4a16-act", "ct-fp8", "ct-fp8-tensor", "ct-fp8-block", "ct-nvfp4",
              "ct-mxfp4"]
VOCAB, LAYERS, GROUP = 128, 2, 64
# An AWQ layer left in fp16 by modules_to_not_convert (AutoAWQ's substring match).
AWQ_NOT_CONVERTED = "model.layers.1.mlp.down_proj"
AWQ_NOT_CONVERTED_MOE = "model.layers.1.mlp.experts.2.down_proj"  # one expert's, in a MoE model
AWQ_NOT_CONVERTED_MIXTRAL = "model.layers.1.block_sparse_moe.experts.2.w2"


def moe_experts(cfg):
    """A MoE config's expert count (Qwen's num_experts, Mixtral's num_local_experts), 0 if dense."""
    return cfg.get("num_experts") or cfg.get("num_local_experts") or 0


def moe_names(cfg):
    """(the MoE block's prefix, the experts' gate, up and down names) as the architecture publishes them."""
    if cfg["architectures"][0] == "MixtralForCausalLM":
        return "block_sparse_moe.", ("w1", "w3", "w2")
    return "mlp.", ("gate_proj", "up_proj", "down_proj")

# ---------------------------------------------------------------------------------------------
# safetensors, written by hand


def to_bf16_bits(x):
    """float32 → bfloat16 bits, round to nearest even (as torch does)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f32(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


class Raw:
    """A tensor given as raw bytes with its safetensors dtype (BF16, F8_E4M3, …)."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), data.tobytes()


NUMPY_DTYPES = {np.float16: "F16", np.float32: "F32", np.int32: "I32", np.uint8: "U8", np.int64: "I64"}


def as_raw(t):
    if isinstance(t, Raw):
        return t
    return Raw(NUMPY_DTYPES[t.dtype.type], t.shape, np.ascontiguousarray(t))


def write_safetensors(path, tensors, edit_header=None):
    """edit_header(header dict, data bytearray) may corrupt the file for the bad-checkpoint tests."""
    header, raws, size = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        r = as_raw(t)
        header[name] = {"dtype": r.dtype, "shape": r.shape, "data_offsets": [size, size + len(r.data)]}
        raws.append(r.data)
        size += len(r.data)
    if edit_header:
        data = bytearray(b"".join(raws))
        edit_header(header, data)
        raws = [data]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    # Tensor by tensor: an 8B shape's embeddings are gigabytes, so no second copy of them all.
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for data in raws:
            f.write(data)


def check_with_safetensors(out, tensors):
    """The files written by hand must read back through the safetensors package (pinned in .venv)."""
    try:
        from safetensors import safe_open
    except ImportError:
        return
    names = set()
    for file in os.listdir(out):
        if file.endswith(".safetensors") and file != "reference.safetensors":
            with safe_open(os.path.join(out, file), framework="numpy") as f:
                names |= set(f.keys())
    assert names == set(tensors), f"{out}: safetensors reads {sorted(names ^ set(tensors))} differently"


# ---------------------------------------------------------------------------------------------
# Number formats

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)


def e4m3_table():
    v = np.zeros(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 0xF, c & 7
        mag = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[c] = np.nan if (c & 0x7F) == 0x7F else (-mag if s else mag)
    return v


E4M3 = e4m3_table()
E4M3_POS = np.arange(0, 0x7F)  # codes 0..126: the finite non-negative values, increasing


def nearest_code(x, codes, values):
    """Nearest of `values[codes]` (sorted increasing) to |x|, sign applied by the caller."""
    vals = values[codes]
    a = np.abs(x)
    i = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    pick = np.where(a - vals[i - 1] <= vals[i] - a, i - 1, i)
    return codes[pick]


def to_e4m3(x):
    c = nearest_code(np.asarray(x, np.float64), E4M3_POS, E4M3).astype(np.uint8)
    return np.where(np.asarray(x) < 0, c | 0x80, c).astype(np.uint8)


def to_e2m1(x):
    c = nearest_code(np.asarray(x, np.float64), np.arange(8), E2M1).astype(np.uint8)
    return np.where(np.asarray(x) < 0, c | 8, c).astype(np.uint8)


def pack_nibbles_low_first(codes):
    """[N][K] 4-bit codes → [N][K/2] bytes, low nibble = even k."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def pack_words(codes, order):
    """[..., 8j + order[p]] → nibble p of word j, for codes whose last axis has 8 per word."""
    c = codes.astype(np.uint32).reshape(*codes.shape[:-1], -1, 8)
    w = np.zeros(c.shape[:-1], np.uint32)
    for p, col in enumerate(order):
        w |= c[..., col] << np.uint32(4 * p)
    return w.view(np.int32)


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEAR_ORDER = list(range(8))

# ---------------------------------------------------------------------------------------------
# Quantisers: W [N][K] float64 → (checkpoint tensors by suffix, exact dequantisation [N][K])


def quant_awq(w, rng, _shared):
    n, k = w.shape
    wt = w.T  # AutoAWQ stores [in][out]
    g = wt.reshape(k // GROUP, GROUP, n)
    lo, hi = g.min(axis=1), g.max(axis=1)
    scales = np.maximum((hi - lo) / 15, 1e-4).astype(np.float16)
    s = scales.astype(np.float64)
    zeros = np.clip(np.round(-lo / s), 0, 15).astype(np.uint32)
    q = np.clip(np.round(g / s[:, None, :]) + zeros[:, None, :], 0, 15).astype(np.uint32)
    deq = ((q.astype(np.float64) - zeros[:, None, :]) * s[:, None, :]).reshape(k, n).T
    tensors = {"qweight": pack_words(q.reshape(k, n), AWQ_ORDER), "qzeros": pack_words(zeros, AWQ_ORDER),
               "scales": scales}
    return tensors, deq


def quant_gptq(w, rng, shared, act_order):
    n, k = w.shape
    if act_order:
        # One permutation per input: q|k|v (and gate|up) see the same activations, so AutoGPTQ's
        # Hessian order is shared and the fused weight has one perm.
        perm = shared.setdefault(("perm", k), rng.permutation(k))
        g_idx = np.empty(k, np.int32)
        g_idx[perm] = np.arange(k) // GROUP
    else:
        g_idx = (np.arange(k) // GROUP).astype(np.int32)
    groups = k // GROUP
    scales = np.zeros((groups, n), np.float16)
    zeros = np.zeros((groups, n), np.uint32)
    for gi in range(groups):
        cols = w[:, g_idx == gi]
        if act_order:  # symmetric, z = 8
            scales[gi] = np.maximum(np.abs(cols).max(axis=1) / 7, 1e-4)
            zeros[gi] = 8
        else:
            lo, hi = cols.min(axis=1), cols.max(axis=1)
            scales[gi] = np.maximum((hi - lo) / 15, 1e-4)
            zeros[gi] = np.clip(np.round(-lo / scales[gi].astype(np.float64)), 1, 15)
    s = scales.astype(np.float64)[g_idx]  # [K][N]
    z = zeros[g_idx].astype(np.float64)
    q = np.clip(np.round(w.T / s) + z, 0, 15).astype(np.uint32)  # [K][N]
    deq = ((q - z) * s).T
    qweight = pack_words(q.T, LINEAR_ORDER).T.copy()  # [K/8][N]: rows 8r + i at nibble i
    qzeros = pack_words(zeros - 1, LINEAR_ORDER)  # v1 stores z − 1
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales, "g_idx": g_idx}, deq


def quant_fp8(w, rng, _shared):
    n, k = w.shape
    bn, bk = -(-n // 128), -(-k // 128)
    scale = np.zeros((bn, bk), np.float32)
    codes = np.zeros((n, k), np.uint8)
    for i in range(bn):
        for j in range(bk):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            scale[i, j] = max(np.abs(blk).max(), 1e-6) / 448
            codes[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = to_e4m3(blk / float(scale[i, j]))
    deq = E4M3[codes] * np.repeat(np.repeat(scale.astype(np.float64), 128, 0), 128, 1)[:n, :k]
    return {"weight": Raw("F8_E4M3", (n, k), codes), "weight_scale_inv": scale}, deq


def quant_fp8_b32(w, rng, _shared, container):
    """FP8 in 32×32 blocks with UE8M0 scales (transformers' fp8 with weight_block_size [32, 32] and
    scale_fmt "ue8m0"): 2^e with e = ⌈log2(amax / 448)⌉ (DeepGEMM's rounding up, so no block
    overflows E4M3), stored as F8_E8M0 bytes e + 127 (torch.float8_e8m0fnu) or as their F32 values."""
    n, k = w.shape
    bn, bk = -(-n // 32), k // 32
    e = np.zeros((bn, bk), np.int64)
    codes = np.zeros((n, k), np.uint8)
    for i in range(bn):
        for j in range(bk):
            blk = w[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32]
            e[i, j] = max(int(np.ceil(np.log2(max(np.abs(blk).max(), 1e-30) / 448))), -14)
            codes[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32] = to_e4m3(blk / np.exp2(float(e[i, j])))
    deq = E4M3[codes] * np.repeat(np.repeat(np.exp2(e.astype(np.float64)), 32, 0), 32, 1)[:n, :k]
    scale = Raw("F8_E8M0", e.shape, (e + 127).astype(np.uint8)) if container == "F8_E8M0" else np.exp2(e).astype(
        np.float32)
    return {"weight": Raw("F8_E4M3", (n, k), codes), "weight_scale_inv": scale}, deq


def quant_fp8_channel(w, rng, _shared):
    """FBGEMM FP8: one f32 scale per output row, stored [N][1]."""
    scale = (np.maximum(np.abs(w).max(axis=1), 1e-6) / 448).astype(np.float32)
    codes = to_e4m3(w / scale.astype(np.float64)[:, None])
    deq = E4M3[codes] * scale.astype(np.float64)[:, None]
    return {"weight": Raw("F8_E4M3", w.shape, codes), "weight_scale": scale.reshape(-1, 1)}, deq


def quant_nvfp4(w, rng, shared):
    n, k = w.shape
    # ModelOpt gives fused layers (q|k|v, gate|up) one weight_scale_2; `shared` carries it.
    scale_2 = shared.setdefault(("scale_2", shared["fuse_key"]), np.float32(np.abs(w).max() / (448 * 6)))
    blocks = w.reshape(n, k // 16, 16)
    bs = to_e4m3(np.abs(blocks).max(axis=2) / 6 / float(scale_2))
    bs = np.where(bs == 0, np.uint8(0x08), bs).astype(np.uint8)  # no zero scales: keep every block nonzero
    eff = E4M3[bs] * float(scale_2)
    codes = to_e2m1(blocks / eff[:, :, None]).reshape(n, k)
    deq = (E2M1[codes].reshape(n, k // 16, 16) * E4M3[bs][:, :, None] * np.float64(scale_2)).reshape(n, k)
    tensors = {"weight": pack_nibbles_low_first(codes), "weight_scale": Raw("F8_E4M3", bs.shape, bs),
               "weight_scale_2": np.array(scale_2, np.float32), "input_scale": np.array(1.0, np.float32)}
    return tensors, deq


def quant_mxfp4(w, rng, _shared):
    n, k = w.shape
    blocks = w.reshape(n, k // 32, 32)
    e = np.floor(np.log2(np.maximum(np.abs(blocks).max(axis=2), 1e-30) / 4)).astype(np.int64)
    e = np.clip(e, -127, 13)
    codes = to_e2m1(blocks / np.exp2(e)[:, :, None].astype(np.float64)).reshape(n, k)
    deq = (E2M1[codes].reshape(n, k // 32, 32) * np.exp2(e)[:, :, None]).reshape(n, k)
    return {"blocks": pack_nibbles_low_first(codes).reshape(n, k // 32, 16),
            "scales": (e + 127).astype(np.uint8)}, deq


# compressed-tensors (llm-compressor's checkpoints): the same quantisations under the library's
# tensor names and layouts (compressed_tensors' pack_to_int32 and its NVFP4/MXFP4 packers).


def ct_group_ids(k, rng, shared, act_order):
    """Each input column's group: in order, or (act-order) one shared permutation's."""
    if not act_order:
        return (np.arange(k) // GROUP).astype(np.int32)
    perm = shared.setdefault(("perm", k), rng.permutation(k))
    g_idx = np.empty(k, np.int32)
    g_idx[perm] = np.arange(k) // GROUP
    return g_idx


def quant_ct_int4(w, rng, shared, symmetric, act_order=False):
    """W4A16 (pack-quantized): signed codes q in [-8, 7] stored q + 8, eight per i32 along K
    (element k at bits 4·(k % 8) of word k / 8); scales [N][K/G]; asymmetric: signed zero points
    zp (W = (q − zp)·s) stored zp + 8, packed down the rows into [N/8][K/G]; act-order: weight_g_idx."""
    n, k = w.shape
    g_idx = ct_group_ids(k, rng, shared, act_order)
    groups = k // GROUP
    scale = np.zeros((n, groups), np.float16)
    zp = np.zeros((n, groups), np.int64)
    for gi in range(groups):
        cols = w[:, g_idx == gi]
        if symmetric:
            scale[:, gi] = np.maximum(np.abs(cols).max(axis=1) / 7, 1e-4)
        else:
            lo, hi = cols.min(axis=1), cols.max(axis=1)
            scale[:, gi] = np.maximum((hi - lo) / 15, 1e-4)
            zp[:, gi] = np.clip(np.round(-lo / scale[:, gi].astype(np.float64)) - 8, -8, 7)
    s, z = scale.astype(np.float64)[:, g_idx], zp[:, g_idx]  # [N][K]
    q = np.clip(np.round(w / s) + z, -8, 7).astype(np.int64)
    deq = (q - z) * s
    tensors = {"weight_packed": pack_words(q + 8, LINEAR_ORDER), "weight_scale": scale,
               "weight_shape": np.array([n, k], np.int64)}
    if not symmetric:
        tensors["weight_zero_point"] = pack_words((zp + 8).T, LINEAR_ORDER).T.copy()  # [N/8][K/G]
    if act_order:
        tensors["weight_g_idx"] = g_idx
    return tensors, deq


def quant_ct_fp8(w, rng, shared, strategy):
    """FP8 (float-quantized): weight E4M3, weight_scale [N][1] (channel), [1] (tensor) or
    [⌈N/128⌉][⌈K/128⌉] (block), f32; W = code · scale."""
    if strategy == "block":
        tensors, deq = quant_fp8(w, rng, shared)
        tensors["weight_scale"] = tensors.pop("weight_scale_inv")
        return tensors, deq
    if strategy == "tensor":
        scale = np.float32(max(np.abs(w).max(), 1e-6) / 448)
        codes = to_e4m3(w / float(scale))
        return {"weight": Raw("F8_E4M3", w.shape, codes), "weight_scale": np.array([scale], np.float32)}, \
            E4M3[codes] * float(scale)
    return quant_fp8_channel(w, rng, shared)


def quant_ct_nvfp4(w, rng, shared):
    """NVFP4 (nvfp4-pack-quantized): ModelOpt's codes and block scales as weight_packed and
    weight_scale, and weight_global_scale = 1 / ModelOpt's weight_scale_2 (a power of two here,
    so both are exact); fused layers share it, as llm-compressor makes them."""
    key = ("ct_scale_2", shared["fuse_key"])
    shared.setdefault(("scale_2", shared["fuse_key"]),
                      shared.setdefault(key, np.float32(2.0 ** np.floor(np.log2(np.abs(w).max() / (448 * 6))))))
    tensors, deq = quant_nvfp4(w, rng, shared)
    return {"weight_packed": tensors["weight"], "weight_scale": tensors["weight_scale"],
            "weight_global_scale": np.array([1 / tensors["weight_scale_2"]], np.float32)}, deq


def quant_ct_mxfp4(w, rng, shared):
    """MXFP4 (mxfp4-pack-quantized): gpt-oss's codes [N][K/2] and UE8M0 scales [N][K/32]."""
    n, k = w.shape
    tensors, deq = quant_mxfp4(w, rng, shared)
    return {"weight_packed": tensors["blocks"].reshape(n, k // 2), "weight_scale": tensors["scales"]}, deq


QUANTISERS = {
    "awq4": quant_awq,
    "gptq4": lambda w, r, s: quant_gptq(w, r, s, False),
    "gptq4-act": lambda w, r, s: quant_gptq(w, r, s, True),
    "fp8": quant_fp8,
    "fp8-channel": quant_fp8_channel,
    "fp8-b32": lambda w, r, s: quant_fp8_b32(w, r, s, "F8_E8M0"),
    "fp8-b32-f32": lambda w, r, s: quant_fp8_b32(w, r, s, "F32"),
    "nvfp4": quant_nvfp4,
    "mxfp4": quant_mxfp4,
    "ct-w4a16": lambda w, r, s: quant_ct_int4(w, r, s, True),
    "ct-w4a16-asym": lambda w, r, s: quant_ct_int4(w, r, s, False),
    "ct-w4a16-act": lambda w, r, s: quant_ct_int4(w, r, s, True, act_order=True),
    "ct-fp8": lambda w, r, s: quant_ct_fp8(w, r, s, "channel"),
    "ct-fp8-tensor": lambda w, r, s: quant_ct_fp8(w, r, s, "tensor"),
    "ct-fp8-block": lambda w, r, s: quant_ct_fp8(w, r, s, "block"),
    "ct-nvfp4": quant_ct_nvfp4,
    "ct-mxfp4": quant_ct_mxfp4,
}


# ---------------------------------------------------------------------------------------------
# Random codes (--random-codes): a real-size checkpoint for speed benchmarks in seconds. Each
# format's tensors with the right names, shapes and dtypes, filled with uniform random codes and
# constant scales chosen so a dequantised weight has about the spread of N(0, 1/K) (activations
# stay finite through the layers); nothing is quantised, and no reference is written. Groups of
# RANDOM_GROUP (AutoAWQ's and AutoGPTQ's usual 128).
RANDOM_GROUP = 128


def e4m3_codes(n, k, rng):
    """Random E4M3 bytes with exponent bit 2 clear: magnitudes ≤ 0x5f (1.875 · 2^4), never the NaN
    code 0x7f, RMS value ≈ 9.6. Masking raw random bytes 8 at a time takes seconds for an 8B model,
    where drawing bounded integers took minutes."""
    codes = np.empty((n, k), np.uint8)
    raw = np.frombuffer(rng.bytes(n * k), np.uint64)
    np.bitwise_and(raw, np.uint64(0xDFDFDFDFDFDFDFDF), out=codes.reshape(-1).view(np.uint64))
    return codes


def random_codes(fmt, n, k, rng):
    u32 = lambda shape: rng.integers(0, 1 << 32, shape, dtype=np.uint32).view(np.int32)  # noqa: E731
    g = RANDOM_GROUP
    if fmt == "awq4":  # codes 0..15 around zero point 8: spread ≈ 4.6 steps
        return {"qweight": u32((k, n // 8)), "qzeros": np.full((k // g, n // 8), 0x88888888, np.uint32).view(np.int32),
                "scales": np.full((k // g, n), 1 / (4.6 * np.sqrt(k)), np.float16)}
    if fmt == "gptq4":  # v1 stores zero − 1 = 7
        return {"qweight": u32((k // 8, n)), "qzeros": np.full((k // g, n // 8), 0x77777777, np.uint32).view(np.int32),
                "scales": np.full((k // g, n), 1 / (4.6 * np.sqrt(k)), np.float16),
                "g_idx": (np.arange(k) // g).astype(np.int32)}
    if fmt == "fp8":  # E4M3 codes of magnitude ≤ 1.875 · 2^4 (no NaN), spread ≈ 9.6
        scale = np.full((-(-n // 128), -(-k // 128)), 1 / (9.6 * np.sqrt(k)), np.float32)
        return {"weight": Raw("F8_E4M3", (n, k), e4m3_codes(n, k, rng)), "weight_scale_inv": scale}
    if fmt == "fp8-b32":  # the same E4M3 codes, 32×32 block exponents 2^e ≈ 1/(9.6 √K) as F8_E8M0 bytes
        codes = e4m3_codes(n, k, rng)
        e = int(np.floor(np.log2(1 / (9.6 * np.sqrt(k)))))
        shape = (-(-n // 32), k // 32)
        return {"weight": Raw("F8_E4M3", (n, k), codes), "weight_scale_inv": Raw("F8_E8M0", shape,
                                                                                 np.full(shape, e + 127, np.uint8))}
    if fmt == "nvfp4":  # E2M1 codes (spread ≈ 3), block scales 1.0 (E4M3 0x38), one global scale
        return {"weight": rng.integers(0, 256, (n, k // 2), dtype=np.uint8),
                "weight_scale": Raw("F8_E4M3", (n, k // 16), np.full((n, k // 16), 0x38, np.uint8)),
                "weight_scale_2": np.array(1 / (3 * np.sqrt(k)), np.float32), "input_scale": np.array(1.0, np.float32)}
    if fmt == "mxfp4":  # E2M1 codes, block exponents 2^e ≈ 1/(3 √K)
        e = int(np.floor(np.log2(1 / (3 * np.sqrt(k)))))
        return {"blocks": rng.integers(0, 256, (n, k // 32, 16), dtype=np.uint8),
                "scales": np.full((n, k // 32), e + 127, np.uint8)}
    sys.exit(f"--random-codes: no random codes for format {fmt} (awq4, gptq4, fp8, fp8-b32, nvfp4, mxfp4)")


def ct_config(fmt):
    """llm-compressor's quantization_config for a ct-* format: one config group over every Linear
    but lm_head, the weight scheme as its presets write it (W4A16, FP8_DYNAMIC, NVFP4, MXFP4)."""
    int4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": GROUP, "dynamic": False,
            "symmetric": fmt != "ct-w4a16-asym", "actorder": "group" if fmt == "ct-w4a16-act" else None,
            "observer": "minmax", "block_structure": None}
    fp8 = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False, "group_size": None,
           "strategy": {"ct-fp8": "channel", "ct-fp8-tensor": "tensor", "ct-fp8-block": "block"}.get(fmt),
           "block_structure": [128, 128] if fmt == "ct-fp8-block" else None, "observer": "minmax"}
    fp4 = {"num_bits": 4, "type": "float", "symmetric": True, "dynamic": False,
           "strategy": "tensor_group" if fmt == "ct-nvfp4" else "group", "group_size": 16 if fmt == "ct-nvfp4" else 32,
           "observer": "minmax"}
    scheme, form = {"ct-w4a16": (int4, "pack-quantized"), "ct-w4a16-asym": (int4, "pack-quantized"),
                    "ct-w4a16-act": (int4, "pack-quantized"), "ct-fp8": (fp8, "float-quantized"),
                    "ct-fp8-tensor": (fp8, "float-quantized"), "ct-fp8-block": (fp8, "float-quantized"),
                    "ct-nvfp4": (fp4, "nvfp4-pack-quantized"), "ct-mxfp4": (fp4, "mxfp4-pack-quantized")}[fmt]
    acts = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True, "symmetric": True} \
        if form == "float-quantized" and fmt != "ct-fp8-block" else None
    return {"quant_method": "compressed-tensors", "format": form, "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": scheme, "input_activations": acts,
                                          "output_activations": None, "format": form}},
            "ignore": ["lm_head"], "kv_cache_scheme": None, "sparsity_config": {}}


def quantization_config(fmt, not_converted=AWQ_NOT_CONVERTED):
    if fmt.startswith("ct-"):
        return ct_config(fmt)
    return {
        "awq4": {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm",
                 "modules_to_not_convert": [not_converted]},
        "gptq4": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": False,
                  "checkpoint_format": "gptq"},
        "gptq4-act": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": True, "sym": True,
                      "checkpoint_format": "gptq"},
        "fp8": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
        "fp8-b32": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
                    "scale_fmt": "ue8m0"},
        "fp8-b32-f32": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                        "weight_block_size": [32, 32], "scale_fmt": "ue8m0"},
        "fp8-channel": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]},
        "nvfp4": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]},
        "mxfp4": {"quant_method": "mxfp4"},
    }.get(fmt)


# ---------------------------------------------------------------------------------------------
# A checkpoint


def decisive_edits(cfg, rng):
    """Edits (tensor-name suffix → function of the random float array) that make a MoE model's
    routing decisive: two backends (GPU and CPU, fp16 in different orders) then choose the same
    experts, where random routers put some token's k-th and (k+1)-th experts within rounding of
    each other and the outputs part. Token t's embedding carries 40 × a random permutation of
    linspace(-1, 1, experts) in its first `experts` dimensions, each layer's post-attention norm
    passes them unscaled and its router reads expert e's logit from dimension e (plus a tenth of
    its random weights): after the norm the pattern's gaps (about 1.6) dwarf what attention and
    the experts add (about 0.15), so no choice is within rounding."""
    experts, hidden, vocab = moe_experts(cfg), cfg["hidden_size"], cfg["vocab_size"]
    pattern = np.stack([rng.permutation(np.linspace(-1.0, 1.0, experts)) for _ in range(vocab)]) * 40.0

    def embed(x):
        x[:, :experts] = pattern
        return x

    def norm(x):
        x[:experts] = 1.0
        return x

    def router(x):
        x = x * 0.1
        x[np.arange(experts), np.arange(experts) % hidden] += 1.0
        return x

    return {"model.embed_tokens.weight": embed, "post_attention_layernorm.weight": norm,
            moe_names(cfg)[0] + "gate.weight": router}


def make(out, arch, fmt, shards=1, seed=0, overflow=False, shape=None, reference_file=True, rope=None,
         sliding_window=None, tokenizer=False, random=False, chat_template=False, decisive_routing=False,
         kv_scales=None):
    """Writes the checkpoint and reference.safetensors into `out`; returns (tensors, config).
    `shape` overrides config fields (hidden_size, …) for larger checkpoints (load throughput);
    `rope` (a ROPES name) replaces the architecture's rotary embedding; `sliding_window` windows
    every layer (Mistral); `tokenizer` writes a byte-level tokenizer of the printable ASCII (with
    `chat_template`, tokenizer_config.json holds CHAT_TEMPLATE);
    `random` fills quantised linears with random codes (random_codes) and writes no reference;
    `decisive_routing` (MoE) makes every router choice win by a wide margin (decisive_edits);
    `kv_scales` adds every layer's self_attn.k_scale and v_scale (fp32 scalars, as llm-compressor
    writes an fp8 KV cache's calibrated scales) of that value."""
    rng = np.random.default_rng(seed)
    cfg = dict(ARCHS[arch], num_hidden_layers=LAYERS, vocab_size=VOCAB, rms_norm_eps=1e-6, hidden_act="silu",
               max_position_embeddings=4096, torch_dtype="bfloat16" if fmt == "bf16" else "float16")
    if rope is not None:
        for key in ("rope_theta", "rope_scaling", "rope_parameters"):
            cfg.pop(key, None)
        cfg.update(ROPES[rope])
    if sliding_window is not None:
        if arch not in ("mistral", "mixtral", "phi3"):
            sys.exit("--sliding-window: only Mistral, Mixtral and Phi-3 window every layer by sliding_window alone")
        cfg["sliding_window"] = sliding_window
    cfg.update(shape or {})
    layers, vocab = cfg["num_hidden_layers"], cfg["vocab_size"]
    moe = moe_experts(cfg) > 0
    not_converted = (AWQ_NOT_CONVERTED_MIXTRAL if arch == "mixtral" else AWQ_NOT_CONVERTED_MOE) if moe \
        else AWQ_NOT_CONVERTED
    if fmt in QUANTISERS:
        cfg["quantization_config"] = quantization_config(fmt, not_converted)
        if random:  # every linear quantised, groups of RANDOM_GROUP
            cfg["quantization_config"].pop("modules_to_not_convert", None)
            if "group_size" in cfg["quantization_config"] and fmt in ("awq4", "gptq4"):
                cfg["quantization_config"]["group_size"] = RANDOM_GROUP
    hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]
    head_dim = cfg.get("head_dim", hidden // cfg["num_attention_heads"])
    q_rows, kv_rows = cfg["num_attention_heads"] * head_dim, cfg["num_key_value_heads"] * head_dim
    tensors, reference, shared = {}, {}, {}

    edits = decisive_edits(cfg, rng) if decisive_routing and moe else {}

    def dense(name, shape, scale):
        """A float tensor as the checkpoint stores it; reference gets its fp16 value."""
        edit = next((f for suffix, f in edits.items() if name.endswith(suffix)), None)
        if random:
            x = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
            tensors[name] = (edit(x) if edit else x).astype(np.float16)
            return
        x = rng.standard_normal(shape) * scale
        if edit:
            x = edit(x)
        if fmt == "bf16":
            bits = to_bf16_bits(x)
            tensors[name] = Raw("BF16", shape, bits)
            reference[name] = bf16_bits_to_f32(bits).astype(np.float16).astype(np.float32)
        else:
            tensors[name] = x.astype(np.float16)
            reference[name] = tensors[name].astype(np.float32)

    def linear(prefix, n, k, fuse_key):
        if random and fmt in QUANTISERS:
            for suffix, t in random_codes(fmt, n, k, rng).items():
                tensors[f"{prefix}.{suffix}"] = t
            return
        w = rng.standard_normal((n, k)) / np.sqrt(k)
        if fmt in QUANTISERS and not (fmt == "awq4" and prefix == not_converted):
            shared["fuse_key"] = fuse_key
            parts, deq = QUANTISERS[fmt](w, rng, shared)
            for suffix, t in parts.items():
                tensors[f"{prefix}.{suffix}"] = t
            reference[f"{prefix}.weight"] = deq.astype(np.float32)
        else:
            dense(f"{prefix}.weight", (n, k), 1 / np.sqrt(k))

    dense("model.embed_tokens.weight", (vocab, hidden), 1.0)
    for i in range(layers):
        p = f"model.layers.{i}."
        dense(p + "input_layernorm.weight", (hidden,), 1.0)
        if arch in FUSED_PROJECTIONS:
            linear(p + "self_attn.qkv_proj", q_rows + 2 * kv_rows, hidden, (i, "qkv"))
        for proj, rows in (("q_proj", q_rows), ("k_proj", kv_rows), ("v_proj", kv_rows)):
            if arch in FUSED_PROJECTIONS:
                break
            linear(p + "self_attn." + proj, rows, hidden, (i, "qkv"))
            if arch in ("qwen2", "qwen2moe"):
                dense(p + f"self_attn.{proj}.bias", (rows,), 0.1)
        if arch in ("qwen3", "qwen3moe"):
            dense(p + "self_attn.q_norm.weight", (head_dim,), 1.0)
            dense(p + "self_attn.k_norm.weight", (head_dim,), 1.0)
        linear(p + "self_attn.o_proj", hidden, q_rows, (i, "o"))
        dense(p + "post_attention_layernorm.weight", (hidden,), 1.0)
        if moe:
            # The router stays in 16 bits in every published quantised MoE checkpoint; the
            # experts' tensors as the architecture publishes them, one set per expert.
            block, (gate_name, up_name, down_name) = moe_names(cfg)
            dense(p + block + "gate.weight", (moe_experts(cfg), hidden), 1 / np.sqrt(hidden))
            expert_inter = cfg.get("moe_intermediate_size", inter)
            for e in range(moe_experts(cfg)):
                q = p + f"{block}experts.{e}."
                linear(q + gate_name, expert_inter, hidden, (i, e, "gate_up"))
                linear(q + up_name, expert_inter, hidden, (i, e, "gate_up"))
                linear(q + down_name, hidden, expert_inter, (i, e, "down"))
            if "shared_expert_intermediate_size" in cfg:  # Qwen2-MoE: the shared expert and its gate
                shared_inter = cfg["shared_expert_intermediate_size"]
                linear(p + "mlp.shared_expert.gate_proj", shared_inter, hidden, (i, "shared_gate_up"))
                linear(p + "mlp.shared_expert.up_proj", shared_inter, hidden, (i, "shared_gate_up"))
                linear(p + "mlp.shared_expert.down_proj", hidden, shared_inter, (i, "shared_down"))
                dense(p + "mlp.shared_expert_gate.weight", (1, hidden), 1 / np.sqrt(hidden))
            continue
        if arch in FUSED_PROJECTIONS:
            linear(p + "mlp.gate_up_proj", 2 * inter, hidden, (i, "gate_up"))
        else:
            linear(p + "mlp.gate_proj", inter, hidden, (i, "gate_up"))
            linear(p + "mlp.up_proj", inter, hidden, (i, "gate_up"))
        linear(p + "mlp.down_proj", hidden, inter, (i, "down"))
    dense("model.norm.weight", (hidden,), 1.0)
    if not cfg["tie_word_embeddings"]:
        dense("lm_head.weight", (vocab, hidden), 1 / np.sqrt(hidden))  # quantisers leave lm_head in 16 bits
    if overflow:  # a finite bf16 beyond fp16's range
        name = "model.layers.1.mlp.up_proj.weight"
        bits = tensors[name].data
        arr = np.frombuffer(bits, np.uint16).copy()
        arr[5] = to_bf16_bits(np.float32(1e6))
        tensors[name] = Raw("BF16", tensors[name].shape, arr)

    if kv_scales is not None:
        for i in range(layers):
            for which in ("k", "v"):
                tensors[f"model.layers.{i}.self_attn.{which}_scale"] = np.array(kv_scales, dtype=np.float32)
    write(out, cfg, tensors, shards)
    if tokenizer:
        write_tokenizer(out, vocab, chat_template)
    if reference_file:
        write_safetensors(os.path.join(out, "reference.safetensors"), reference)
        check_with_safetensors(out, tensors)
    if fmt == "nvfp4":
        with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
            json.dump({"producer": {"name": "modelopt"},
                       "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}, f)
    return tensors, cfg


def byte_level_char(b):
    """The character GPT-2's byte-level pre-tokenizer maps byte b (0–126) to: 0–32 become
    U+0100–U+0120 (so a space is Ġ), 33–126 stay."""
    return chr(b + 256) if b <= 32 else chr(b)


# A ChatML-like template in the printable ASCII the tiny tokenizer covers (no newlines), with
# tools, earlier tool calls (Hermes's <tool_call> form) and template variables for
# chat_template_kwargs: enable_thinking, and open_think (the generation prompt ends with <think>,
# as DeepSeek-R1's does).
CHAT_TEMPLATE = ("{% if tools %}<|tools|>{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}"
                 "{% for m in messages %}<|{{ m.role }}|>{% if m.content %}{{ m.content }}{% endif %}"
                 "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ c.function.name }}\", "
                 "\"arguments\": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% endfor %}"
                 "{% if enable_thinking is defined and not enable_thinking %}/no_think{% endif %}"
                 "{% if add_generation_prompt %}<|assistant|>{% if open_think %}<think>{% endif %}{% endif %}")


def write_tokenizer(out, vocab, chat_template=False):
    """tokenizer.json (byte-level BPE over the printable ASCII bytes, ids 0–94, a few merges),
    tokenizer_config.json (with CHAT_TEMPLATE if asked) and generation_config.json with
    <eos> = id 95, <bos> = id 96."""
    chars = [byte_level_char(b) for b in range(32, 127)]
    merges = [("t", "h"), ("th", "e"), ("Ġ", "the"), ("i", "n"), ("Ġ", "a")]
    tokens = chars + ["<eos>", "<bos>"] + ["".join(m) for m in merges]
    assert len(tokens) <= vocab
    model = {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [" ".join(m) for m in merges]}
    special = [{"id": 95, "content": "<eos>", "special": True, "normalized": False},
               {"id": 96, "content": "<bos>", "special": True, "normalized": False}]
    tok = {"version": "1.0", "added_tokens": special, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": False},
           "post_processor": None, "decoder": {"type": "ByteLevel"}, "model": model}
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f, indent=1)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>"}
        if chat_template:
            config["chat_template"] = CHAT_TEMPLATE
        json.dump(config, f)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 96, "eos_token_id": 95}, f)


def write(out, cfg, tensors, shards=1, edit_header=None):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), tensors, edit_header)
        return
    names = list(tensors)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        write_safetensors(os.path.join(out, file), part)
        weight_map.update({n: file for n in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


# ---------------------------------------------------------------------------------------------
# Bad checkpoints: one defect each (tests/checkpoint_test.cpp says what each must name)


def bad(out, case):
    fmt = {"nan-scales": "awq4", "bf16-overflow": "bf16", "nan-fp8-scale": "fp8", "nan-nvfp4-block-scale": "nvfp4",
           "nan-fp8-b32-scale": "fp8-b32", "fp8-b32-scale-out-of-range": "fp8-b32",
           "fp8-b32-scale-not-power-of-two": "fp8-b32-f32", "fp8-b32-wrong-scale-shape": "fp8-b32",
           "fp8-b32-without-ue8m0": "fp8-b32-f32"}
    tensors, cfg = make(out, "llama", fmt.get(case, "f16"), overflow=case == "bf16-overflow")
    path = os.path.join(out, "model.safetensors")
    victim = "model.layers.1.self_attn.k_proj.weight"
    if case == "missing-shard":
        write(out, cfg, tensors, shards=2)
        os.remove(path)
        os.remove(os.path.join(out, "model-00002-of-00002.safetensors"))
    elif case == "index-names-absent-tensor":
        write(out, cfg, tensors, shards=2)
        os.remove(path)
        index = os.path.join(out, "model.safetensors.index.json")
        j = json.load(open(index))
        j["weight_map"]["model.layers.0.mlp.extra.weight"] = "model-00001-of-00002.safetensors"
        json.dump(j, open(index, "w"))
    elif case == "missing-tensor":
        del tensors["model.layers.1.mlp.up_proj.weight"]
        write(out, cfg, tensors)
    elif case == "wrong-shape":
        tensors[victim] = tensors[victim][:, :-8].copy()
        write(out, cfg, tensors)
    elif case == "wrong-dtype":
        tensors["model.norm.weight"] = tensors["model.norm.weight"].astype(np.int32)
        write(out, cfg, tensors)
    elif case == "truncated":
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size - 1000)
    elif case == "lying-offsets":
        def lie(header, data):  # the last tensor, moved past the end of the data
            header["lm_head.weight"]["data_offsets"][1] += 64
            header["lm_head.weight"]["data_offsets"][0] += 64
        write(out, cfg, tensors, edit_header=lie)
    elif case == "size-mismatch":
        def lie(header, data):
            header[victim]["shape"] = [header[victim]["shape"][0], header[victim]["shape"][1] - 1]
        write(out, cfg, tensors, edit_header=lie)
    elif case == "header-too-long":
        with open(path, "r+b") as f:
            f.write(struct.pack("<Q", os.path.getsize(path) + 4096))
    elif case == "overlap":
        def lie(header, data):
            other = header["model.layers.1.self_attn.q_proj.weight"]["data_offsets"]
            length = header[victim]["data_offsets"][1] - header[victim]["data_offsets"][0]
            header[victim]["data_offsets"] = [other[0] + 2, other[0] + 2 + length]
        write(out, cfg, tensors, edit_header=lie)
    elif case == "unknown-dtype":
        def lie(header, data):
            header[victim]["dtype"] = "F4"
        write(out, cfg, tensors, edit_header=lie)
    elif case == "unknown-quant":
        cfg["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
        write(out, cfg, tensors)
    elif case == "unknown-architecture":
        cfg["architectures"] = ["GPTNeoXForCausalLM"]
        write(out, cfg, tensors)
    elif case == "too-many-layers":  # sized the layers before any tensor was read: std::bad_alloc
        cfg["num_hidden_layers"] = 2**24  # the most config.json may say; 16M layers of vectors is gigabytes
        write(out, cfg, tensors)
    elif case == "nan-scales":
        name = "model.layers.0.self_attn.v_proj.scales"
        s = tensors[name].copy()
        s[1, 3] = np.nan
        tensors[name] = s
        write(out, cfg, tensors)
    elif case == "nan-fp8-scale":
        name = "model.layers.1.mlp.down_proj.weight_scale_inv"
        s = tensors[name].copy()
        s[0, 1] = np.nan
        tensors[name] = s
        write(out, cfg, tensors)
    elif case == "nan-nvfp4-block-scale":
        name = "model.layers.0.mlp.gate_proj.weight_scale"
        codes = np.frombuffer(tensors[name].data, np.uint8).reshape(tensors[name].shape).copy()
        codes[2, 3] = 0x7F  # the E4M3 NaN code
        tensors[name] = Raw("F8_E4M3", codes.shape, codes)
        write(out, cfg, tensors)
    elif case in ("nan-fp8-b32-scale", "fp8-b32-scale-out-of-range"):
        name = "model.layers.0.self_attn.o_proj.weight_scale_inv"
        e8m0 = np.frombuffer(tensors[name].data, np.uint8).reshape(tensors[name].shape).copy()
        e8m0[1, 2] = 255 if case == "nan-fp8-b32-scale" else 127 - 20  # NaN; 2^-20, past fp16 for small codes
        tensors[name] = Raw("F8_E8M0", e8m0.shape, e8m0)
        write(out, cfg, tensors)
    elif case == "fp8-b32-scale-not-power-of-two":
        name = "model.layers.1.mlp.gate_proj.weight_scale_inv"
        s = tensors[name].copy()
        s[3, 4] *= 0.75
        tensors[name] = s
        write(out, cfg, tensors)
    elif case == "fp8-b32-wrong-scale-shape":  # 128×128 blocks' scales under a [32, 32] config
        name = "model.layers.0.mlp.down_proj.weight_scale_inv"
        t = tensors[name]
        e8m0 = np.frombuffer(t.data, np.uint8).reshape(t.shape)[::4, ::4].copy()
        tensors[name] = Raw("F8_E8M0", e8m0.shape, e8m0)
        write(out, cfg, tensors)
    elif case == "fp8-b32-without-ue8m0":  # arbitrary float scales cannot be fp8b32's exponents
        del cfg["quantization_config"]["scale_fmt"]
        write(out, cfg, tensors)
    elif case == "bf16-overflow":
        pass
    else:
        sys.exit(f"unknown bad case {case}")


BAD_CASES = ["missing-shard", "index-names-absent-tensor", "missing-tensor", "wrong-shape", "wrong-dtype", "truncated",
             "lying-offsets", "size-mismatch", "header-too-long", "overlap", "unknown-dtype", "unknown-quant",
             "unknown-architecture", "nan-scales", "nan-fp8-scale", "nan-nvfp4-block-scale", "bf16-overflow",
             "nan-fp8-b32-scale", "fp8-b32-scale-out-of-range", "fp8-b32-scale-not-power-of-two",
             "fp8-b32-wrong-scale-shape", "fp8-b32-without-ue8m0", "too-many-layers"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--arch", choices=list(ARCHS), default="llama")
    ap.add_argument("--format", choices=FORMATS + CT_FORMATS, default="f16")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--bad", choices=BAD_CASES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rope", choices=list(ROPES), help="rotary embedding instead of the architecture's")
    ap.add_argument("--sliding-window", type=int, help="Mistral: every layer sees only the last N keys")
    ap.add_argument("--tokenizer", action="store_true", help="write a byte-level tokenizer of the printable ASCII")
    ap.add_argument("--chat-template", action="store_true", help="with --tokenizer: a chat template in tokenizer_config.json")
    ap.add_argument("--shape", type=json.loads, default=None,
                    help='config fields to override, e.g. \'{"hidden_size": 4096, "intermediate_size": 14336, '
                         '"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000}\'; '
                         'no reference file is written then')
    ap.add_argument("--random-codes", action="store_true",
                    help="quantised linears of random codes, not quantised values (fast; speed benchmarks; "
                         "needs --shape, writes no reference)")
    ap.add_argument("--decisive-routing", action="store_true",
                    help="MoE: routers whose every choice wins by a wide margin (GPU-against-CPU checks)")
    ap.add_argument("--kv-scales", type=float, help="every layer's self_attn.k_scale and v_scale (fp8 KV cache)")
    ap.add_argument("--all", action="store_true", help="OUT/<arch>-<format>/ for all, OUT/bad-<case>/ for every defect")
    a = ap.parse_args()
    if a.all:
        for arch in ARCHS:
            for fmt in FORMATS:
                # Sharded f16 checkpoints exercise model.safetensors.index.json.
                make(os.path.join(a.out, f"{arch}-{fmt}"), arch, fmt, shards=3 if fmt == "f16" else 1)
        for arch in ("llama", "qwen3"):
            for fmt in CT_FORMATS:
                make(os.path.join(a.out, f"{arch}-{fmt}"), arch, fmt)
        for case in BAD_CASES:
            bad(os.path.join(a.out, f"bad-{case}"), case)
    elif a.bad:
        bad(a.out, a.bad)
    else:
        if a.chat_template and not a.tokenizer:
            sys.exit("--chat-template needs --tokenizer")
        if a.random_codes and a.shape is None:
            sys.exit("--random-codes needs --shape (it makes real-size checkpoints for speed benchmarks)")
        make(a.out, a.arch, a.format, a.shards, seed=a.seed, shape=a.shape, reference_file=a.shape is None, rope=a.rope,
             sliding_window=a.sliding_window, tokenizer=a.tokenizer, random=a.random_codes,
             chat_template=a.chat_template, decisive_routing=a.decisive_routing, kv_scales=a.kv_scales)


if __name__ == "__main__":
    main()
