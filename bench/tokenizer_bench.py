#!/usr/bin/env python3
"""Single-threaded encode throughput, onecat vs Hugging Face tokenizers, JSON out.

Each vocabulary (GGUF test vocabularies converted by tools/gguf_to_tokenizer_json.py, or
checkpoint directories given with --model) encodes the same generated corpus: "mixed"
(tools/tokenizer_corpus.py: code, CJK, emoji, odd whitespace, random code points) and
"prose" (English words and source code only). Best of --repeat runs in CPU seconds (the
figure should not depend on the machine's other load); load time excluded.

    bench/tokenizer_bench.py [--mb 4] [--vocab llama-bpe,qwen2] [--model DIR ...] [--out FILE]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# tokenizers parallelises encode_batch across cores unless told not to.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gguf_to_tokenizer_json as converter  # noqa: E402
import tokenizer_corpus  # noqa: E402
import tokenizers  # noqa: E402


def prose(total_bytes, seed=0):
    rng = random.Random(seed)
    words = tokenizer_corpus._WORDS[:60]
    docs, size = [], 0
    while size < total_bytes:
        if rng.random() < 0.3:
            doc = "".join(rng.choice(tokenizer_corpus._CODE).format(n="value", d=rng.randrange(1000)) for _ in range(8))
        else:
            doc = " ".join(rng.choice(words) for _ in range(rng.randint(20, 300))) + "."
        docs.append(doc)
        size += len(doc.encode())
    return docs


def bench_tokenizers(path, docs, repeat):
    """Best CPU seconds of encode_batch and of encode_batch_fast (no offsets), whichever wins."""
    tok = tokenizers.Tokenizer.from_file(str(path))
    best = float("inf")
    for method in (tok.encode_batch, getattr(tok, "encode_batch_fast", tok.encode_batch)):
        for _ in range(repeat):
            start = time.process_time()
            method(docs, add_special_tokens=False)
            best = min(best, time.process_time() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=4.0, help="corpus size per kind, MB")
    parser.add_argument("--vocab", default="llama-bpe,qwen2,gpt-2,llama-spm,gemma-4",
                        help="test vocabularies (ggml-vocab-NAME.gguf in $ONECAT_TESTDATA)")
    parser.add_argument("--model", action="append", default=[], help="a checkpoint directory with tokenizer.json")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bench-bin", default=str(ROOT / "build" / "tokenizer_bench"))
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="onecat_tokbench_") as tmp:
        run(args, Path(tmp))


def run(args, work):
    models = [(Path(m).name, Path(m)) for m in args.model]
    testdata = os.environ.get("ONECAT_TESTDATA")
    for name in filter(None, args.vocab.split(",")):
        if not testdata:
            sys.exit("tokenizer_bench: set ONECAT_TESTDATA (scripts/fetch-testdata prints it) or pass --model")
        tokenizer_json, config = converter.convert(converter.read_gguf_metadata(Path(testdata) / f"ggml-vocab-{name}.gguf"))
        d = work / name
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
        (d / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        models.append((name, d))

    nbytes = int(args.mb * (1 << 20))
    corpora = {"mixed": tokenizer_corpus.documents(nbytes, seed=3), "prose": prose(nbytes, seed=3)}
    results = []
    for kind, docs in corpora.items():
        docs_file = work / f"{kind}.jsonl"
        docs_file.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        size = sum(len(d.encode()) for d in docs)
        for name, d in models:
            ours = json.loads(subprocess.run([args.bench_bin, str(d), str(docs_file), str(args.repeat)], check=True,
                                             capture_output=True, text=True).stdout)
            theirs = bench_tokenizers(d / "tokenizer.json", docs, args.repeat)
            row = {"vocab": name, "corpus": kind, "bytes": size, "onecat_mb_s": round(ours["mb_per_s"], 2),
                   "tokenizers_mb_s": round(size / theirs / 1e6, 2),
                   "ratio": round(ours["mb_per_s"] / (size / theirs / 1e6), 2)}
            results.append(row)
            print(json.dumps(row), file=sys.stderr)
    report = {"tokenizers_version": tokenizers.__version__, "threads": 1, "results": results}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
