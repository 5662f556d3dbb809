#!/usr/bin/env python3
"""Writes a GGUF file's tokenizer as a Hugging Face tokenizer.json + tokenizer_config.json.

Pure Python (reads GGUF itself), so the `tokenizers` package can load any test vocabulary
and serve as the reference for onecat's tokenizer. GGUF names its pre-tokenizer
(tokenizer.ggml.pre); the table below gives each supported name's pre-tokenizer and
normalizer as that model family's own tokenizer.json has them.

    tools/gguf_to_tokenizer_json.py ggml-vocab-llama-bpe.gguf OUT_DIR
"""
import argparse
import json
import os
import struct
import sys

METASPACE = "\u2581"
# llama.cpp's token types
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_metadata(path):
    """The key/value metadata of a GGUF (v2/v3) file; tensors are not read."""
    with open(path, "rb") as f:
        def unpack(fmt):
            size = struct.calcsize(fmt)
            data = f.read(size)
            if len(data) != size:
                raise ValueError(f"{path} is truncated inside its GGUF metadata")
            return struct.unpack(fmt, data)[0]

        def string():
            return f.read(unpack("<Q")).decode("utf-8", errors="surrogateescape")

        def value(kind):
            if kind in _SCALARS:
                return unpack(_SCALARS[kind])
            if kind == 8:
                return string()
            if kind == 9:
                element, count = unpack("<I"), unpack("<Q")
                return [value(element) for _ in range(count)]
            raise ValueError(f"{path} has a GGUF value of unknown type {kind}")

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = unpack("<I")
        if version not in (2, 3):
            raise ValueError(f"{path} is GGUF version {version}; versions 2 and 3 are read")
        unpack("<Q")  # tensor count
        return {string(): value(unpack("<I")) for _ in range(unpack("<Q"))}


def _split(regex, behavior="Isolated"):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": False}


def _byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def _digits(individual):
    return {"type": "Digits", "individual_digits": individual}


def _sequence(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
         r"|\s+(?!\S)|\s+")
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _char_class(ranges):
    """A regex character class of literal characters from (first, last) code point pairs."""
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


DEEPSEEK_LETTERS = r"\s?[A-Za-z" + _char_class([
    (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF),
    (0x370, 0x373), (0x376, 0x376), (0x377, 0x377), (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A),
    (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B),
    (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D),
    (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4),
    (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB),
    (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128), (0x212A, 0x212D),
    (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2183),
    (0x2184, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF2), (0x2CF3, 0x2CF3),
    (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3),
    (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943)]) + "]+"
DEEPSEEK_PUNCTUATION = r"\s?[!-/:-~" + _char_class([(0xFF01, 0xFF0F), (0xFF1A, 0xFF5E), (0x2018, 0x201F),
                                                    (0x3000, 0x3002)]) + "]+"
CJK = "[" + _char_class([(0x4E00, 0x9FA5), (0x800, 0x4E00), (0xAC00, 0xD7FF)]) + "]+"


def pre_tokenizer_for(name):
    """(pre_tokenizer, normalizer, ignore_merges, add_bos_by_default) for a GGUF pre name."""
    if name in ("gpt-2", "gpt2", "mpt", "olmo", "phi-2", "default"):
        return _byte_level(True), None, False, False
    if name in ("llama-bpe", "llama3", "llama-v3"):
        return _sequence(_split(LLAMA3), _byte_level(False)), None, True, True
    if name in ("qwen2", "deepseek-r1-qwen"):
        return _sequence(_split(QWEN2), _byte_level(False)), {"type": "NFC"}, False, False
    if name == "qwen35":
        return _sequence(_split(QWEN35), _byte_level(False)), None, False, False
    if name in ("starcoder", "refact", "command-r", "smollm", "codeshell"):
        return _sequence(_digits(True), _byte_level(True)), None, False, False
    if name == "falcon":
        return _sequence({"type": "Punctuation", "behavior": "Contiguous"}, _byte_level(True), _digits(False),
                         _split("[0-9][0-9][0-9]")), None, False, False
    if name == "deepseek-llm":
        return _sequence(_split("[\r\n]"), _split(DEEPSEEK_LETTERS), _split(DEEPSEEK_PUNCTUATION), _split(r"\s+$"),
                         _split(CJK), _digits(True), _byte_level(False)), None, False, False
    if name == "deepseek-coder":
        return _sequence(_split("[\r\n]"), _split(r"\s?\p{L}+"), _split(r"\s?\p{P}+"), _split(CJK), _digits(True),
                         _byte_level(False)), None, False, False
    raise ValueError(f"the GGUF pre-tokenizer '{name}' is not supported")


def merges_from_scores(tokens, scores, vocab):
    """SentencePiece keeps scores, not merges: every split of every piece into two pieces,
    ordered by the piece's score (highest first), a piece's splits by their halves' ids."""
    merges = []
    for token_id, piece in enumerate(tokens):
        local = []
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], scores[token_id]))
        local.sort(key=lambda m: (m[0], m[1]))
        merges.extend(local)
    merges.sort(key=lambda m: -m[2])
    return [[tokens[left], tokens[right]] for left, right, _ in merges]


def split_merge(merge, vocab):
    parts = merge.split(" ")
    if len(parts) == 2:
        return parts
    for i in range(1, len(parts)):
        left, right = " ".join(parts[:i]), " ".join(parts[i:])
        if left in vocab and right in vocab and left + right in vocab:
            return [left, right]
    raise ValueError(f"the GGUF merge {merge!r} does not split into two tokens of the vocabulary")


def convert(meta):
    """GGUF metadata → (tokenizer.json, tokenizer_config.json) as dicts."""
    model = meta.get("tokenizer.ggml.model")
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [NORMAL] * len(tokens))
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)  # a repeated piece keeps its first id, as in onecat
    bos = meta.get("tokenizer.ggml.bos_token_id")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": types[i] != USER_DEFINED}
             for i, t in enumerate(tokens) if types[i] in (CONTROL, USER_DEFINED, UNKNOWN)]
    bpe = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
           "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    if model == "gpt2":
        pre, normalizer, ignore_merges, add_bos_default = pre_tokenizer_for(meta.get("tokenizer.ggml.pre", "default"))
        merges = [split_merge(m, vocab) for m in meta["tokenizer.ggml.merges"]]
        bpe["ignore_merges"] = ignore_merges
        decoder = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        add_bos = meta.get("tokenizer.ggml.add_bos_token", add_bos_default)
    elif model in ("llama", "gemma4"):
        gemma = model == "gemma4"
        if gemma:
            merges = [split_merge(m, vocab) for m in meta["tokenizer.ggml.merges"]]
        else:
            merges = merges_from_scores(tokens, meta["tokenizer.ggml.scores"], vocab)
        prefix = meta.get("tokenizer.ggml.add_space_prefix", not gemma)
        replace = {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}
        normalizer = ({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": METASPACE}, replace]}
                      if prefix else replace)
        pre = None
        decoders = [{"type": "Replace", "pattern": {"String": METASPACE}, "content": " "}, {"type": "ByteFallback"},
                    {"type": "Fuse"}]
        if prefix:
            decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
        decoder = {"type": "Sequence", "decoders": decoders}
        unk = meta.get("tokenizer.ggml.unknown_token_id")
        if unk is None:
            unk = next((i for i, t in enumerate(types) if t == UNKNOWN), None)
        bpe.update(byte_fallback=True, fuse_unk=True, unk_token=tokens[unk] if unk is not None else None)
        add_bos = meta.get("tokenizer.ggml.add_bos_token", True)
    else:
        raise ValueError(f"the GGUF tokenizer model '{model}' is not supported (gpt2, llama and gemma4 BPE are)")
    add_eos = meta.get("tokenizer.ggml.add_eos_token", False)

    single, special = [], {}

    def add_special(token_id):
        name = tokens[token_id]
        single.append({"SpecialToken": {"id": name, "type_id": 0}})
        special[name] = {"id": name, "ids": [token_id], "tokens": [name]}

    if add_bos and bos is not None:
        add_special(bos)
    single.append({"Sequence": {"id": "A", "type_id": 0}})
    if add_eos and eos is not None:
        add_special(eos)
    bpe["vocab"] = vocab
    bpe["merges"] = merges
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                 "normalizer": normalizer, "pre_tokenizer": pre,
                 "post_processor": {"type": "TemplateProcessing", "single": single, "pair": single,
                                    "special_tokens": special},
                 "decoder": decoder, "model": bpe}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1 << 20}
    if bos is not None:
        config["bos_token"] = tokens[bos]
    if eos is not None:
        config["eos_token"] = tokens[eos]
    return tokenizer, config


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf")
    parser.add_argument("out_dir")
    args = parser.parse_args()
    try:
        tokenizer, config = convert(read_gguf_metadata(args.gguf))
    except (ValueError, KeyError) as e:
        sys.exit(f"gguf_to_tokenizer_json: {args.gguf}: {e}")
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(os.path.join(args.out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
