"""onecat's tokenizer against Hugging Face `tokenizers` (CPU only).

Each BPE vocabulary of the pinned llama.cpp test set is written as a tokenizer.json by
tools/gguf_to_tokenizer_json.py; `tokenizers` must reproduce the expected ids with it
(so the conversion is right), then onecat (the `onecat` CLI, loading the same
tokenizer.json, and the GGUF itself) must give the same ids and the same decoded text on
generated mixed text: 0.25 MB per vocabulary, 3.5 MB in all (ONECAT_TOKENIZER_CORPUS_MB sets the
size per vocabulary; 4 or more for a thorough run).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gguf_to_tokenizer_json as converter  # noqa: E402
import tokenizer_corpus  # noqa: E402

MARKER = "\n__ggml_vocab_test__\n"
# Vocabularies with expected ids that are not BPE, hence not onecat's (and why).
EXCLUDED = {"ggml-vocab-bert-bge.gguf": "WordPiece (BERT)"}


def _testdata() -> Path:
    d = os.environ.get("ONECAT_TESTDATA")
    if not d or not Path(d).is_dir():
        pytest.fail("ONECAT_TESTDATA is not set to the test vocabularies; run scripts/fetch-testdata and set "
                    "ONECAT_TESTDATA to the folder it prints (scripts/test does both).")
    return Path(d)


def _vocabularies():
    d = os.environ.get("ONECAT_TESTDATA")
    if not d or not Path(d).is_dir():
        return ["ONECAT_TESTDATA missing"]
    return sorted(p.name for p in Path(d).glob("*.gguf") if Path(str(p) + ".out").exists() and p.name not in EXCLUDED)


def _onecat_bin() -> Path:
    build = Path(os.environ.get("ONECAT_BUILD_DIR", ROOT / "build"))
    exe = build / "onecat"
    if not exe.exists():
        pytest.fail(f"{exe} does not exist; build the onecat CLI first (scripts/build).")
    return exe


def _run(args, lines):
    proc = subprocess.run([str(_onecat_bin()), *args], input="".join(json.dumps(x) + "\n" for x in lines),
                          capture_output=True, text=True, encoding="utf-8")
    assert proc.returncode == 0, proc.stderr
    # One JSON value per "\n"-ended line (str.splitlines would also cut at U+2028 and friends).
    return [json.loads(line) for line in proc.stdout.split("\n")[:-1]]


def _cases(gguf: Path):
    texts = gguf.with_name(gguf.name + ".inp").read_text(encoding="utf-8").split(MARKER)[:-1]
    ids = gguf.with_name(gguf.name + ".out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, ids)]


def _corpus_bytes() -> int:
    return int(float(os.environ.get("ONECAT_TOKENIZER_CORPUS_MB", "0.25")) * (1 << 20))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """vocabulary name → (directory with tokenizer.json, `tokenizers.Tokenizer`)."""
    cache = {}

    def get(name):
        if name not in cache:
            gguf = _testdata() / name
            tokenizer_json, config = converter.convert(converter.read_gguf_metadata(gguf))
            out = tmp_path_factory.mktemp(name.replace(".", "_"))
            (out / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
            (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
            cache[name] = (out, tokenizers.Tokenizer.from_file(str(out / "tokenizer.json")))
        return cache[name]

    return get


def test_exclusions_are_exactly_the_non_bpe_vocabularies():
    d = _testdata()
    for name in EXCLUDED:
        with pytest.raises(ValueError):
            converter.convert(converter.read_gguf_metadata(d / name))


@pytest.mark.parametrize("name", _vocabularies())
def test_converted_tokenizer_json_gives_expected_ids(name, converted):
    _, hf = converted(name)
    for text, want in _cases(_testdata() / name):
        assert hf.encode(text, add_special_tokens=False).ids == want, repr(text)


def _specials(hf):
    return [t.content for t in hf.get_added_tokens_decoder().values()][:64]


def _compare(name, got, want, docs):
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert len(got) == len(want)
    assert not bad, f"{name}: {len(bad)} of {len(docs)} differ; first: {docs[bad[0]]!r:.300} → onecat {got[bad[0]]!r:.300}, " \
                    f"tokenizers {want[bad[0]]!r:.300}"


@pytest.mark.parametrize("name", _vocabularies())
def test_onecat_equals_tokenizers_on_mixed_text(name, converted):
    directory, hf = converted(name)
    docs = tokenizer_corpus.documents(_corpus_bytes(), seed=zlib.crc32(name.encode()), specials=_specials(hf))
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    _compare(name, _run(["tokenize", "--model", str(directory), "--no-special", "--jsonl"], docs), want, docs)

    # The template (BOS etc.) and the GGUF loader, on a sample.
    sample = docs[:200]
    with_special = [e.ids for e in hf.encode_batch(sample, add_special_tokens=True)]
    _compare(name, _run(["tokenize", "--model", str(directory), "--jsonl"], sample), with_special, sample)
    _compare(name, _run(["tokenize", "--model", str(_testdata() / name), "--jsonl"], sample), with_special, sample)

    # Decoding what was encoded, with and without special tokens.
    texts = hf.decode_batch(want, skip_special_tokens=False)
    _compare(name, _run(["detokenize", "--model", str(directory), "--jsonl"], want), texts, docs)
    skipped = hf.decode_batch(want[:200], skip_special_tokens=True)
    _compare(name, _run(["detokenize", "--model", str(directory), "--skip-special", "--jsonl"], want[:200]), skipped, docs)


@pytest.mark.parametrize("name", _vocabularies())
def test_onecat_decodes_random_ids_like_tokenizers(name, converted):
    """Random ids: byte tokens that never form a character, special tokens mid-text."""
    directory, hf = converted(name)
    rng = random.Random(1)
    size = hf.get_vocab_size(with_added_tokens=True)
    seqs = [[rng.randrange(size) for _ in range(rng.randint(1, 30))] for _ in range(300)]
    _compare(name, _run(["detokenize", "--model", str(directory), "--jsonl"], seqs),
             hf.decode_batch(seqs, skip_special_tokens=False), seqs)
    _compare(name, _run(["detokenize", "--model", str(directory), "--skip-special", "--jsonl"], seqs),
             hf.decode_batch(seqs, skip_special_tokens=True), seqs)


@pytest.mark.parametrize("name", ["ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"])
def test_added_token_options_match_tokenizers(name, converted, tmp_path):
    """lstrip / rstrip / single_word / normalized on added tokens, as tokenizers applies them."""
    directory, reference = converted(name)
    hf_size = reference.get_vocab_size(with_added_tokens=True)
    spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    added = spec["added_tokens"]
    options = [{"lstrip": True}, {"rstrip": True}, {"lstrip": True, "rstrip": True}, {"single_word": True},
               {"normalized": True, "special": False}]
    for token, option in zip(added[-len(options):], options):
        token.update(option)
    # Two added tokens that are also in the model vocabulary (they keep its id), one new.
    vocab = spec["model"]["vocab"]
    extra = [{"id": vocab.get(word, hf_size), "content": word, "single_word": i == 0, "lstrip": False,
              "rstrip": i == 1, "normalized": True, "special": False}
             for i, word in enumerate(["hello", "wor", "zq\u00e9x"])]
    spec["added_tokens"] = added + extra
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    names = [t["content"] for t in added[-len(options):]] + ["hello", "wor", "zq\u00e9x"]
    rng = random.Random(2)
    docs = ["".join(rng.choice(names + [" ", "  ", "\n", "a", "hello world", "xhello", "world", "\t", "é"])
                    for _ in range(rng.randint(1, 12))) for _ in range(500)]
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    _compare(name, _run(["tokenize", "--model", str(tmp_path), "--no-special", "--jsonl"], docs), want, docs)


@pytest.mark.parametrize("scheme,split", [("first", False), ("always", True), ("never", False)])
def test_metaspace_variants_match_tokenizers(scheme, split, converted, tmp_path):
    """Llama 2's vocabulary as newer conversions (Mistral, Llama 2 with legacy=False) write it:
    a Metaspace pre-tokenizer and decoder instead of the Prepend/Replace normalizer."""
    directory, reference = converted("ggml-vocab-llama-spm.gguf")
    spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = None
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
    spec["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    docs = tokenizer_corpus.documents(1 << 17, seed=9, specials=_specials(reference))
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=True)]
    _compare(scheme, _run(["tokenize", "--model", str(tmp_path), "--jsonl"], docs), want, docs)
    texts = hf.decode_batch(want, skip_special_tokens=False)
    _compare(scheme, _run(["detokenize", "--model", str(tmp_path), "--jsonl"], want), texts, docs)


@pytest.mark.parametrize("name", ["ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"])
def test_python_binding_equals_tokenizers(name, converted):
    """onecat.Tokenizer / onecat.DecodeStream (the pybind11 binding) on a sample of the corpus."""
    onecat = pytest.importorskip("onecat")
    if not hasattr(onecat, "Tokenizer"):
        pytest.skip("the installed onecat package predates its Tokenizer; reinstall it (scripts/install-python)")
    directory, hf = converted(name)
    ours = onecat.Tokenizer(directory)
    docs = tokenizer_corpus.documents(1 << 16, seed=5, specials=_specials(hf))
    for doc in docs:
        ids = hf.encode(doc).ids
        assert ours.encode(doc) == ids, repr(doc)
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        stream = onecat.DecodeStream(ours)
        assert "".join(stream.step(i) for i in ids) + stream.finish() == ours.decode(ids)
    assert ours.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    with pytest.raises(ValueError, match="does not exist"):
        onecat.Tokenizer(directory / "missing")
