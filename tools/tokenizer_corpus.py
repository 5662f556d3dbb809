"""Deterministic mixed text for comparing tokenizers: the cases where tokenizers differ.

Source code, prose with contractions, CJK, emoji with ZWJ sequences and modifiers,
combining marks, whitespace runs of every kind, digits of many scripts, special-token
strings inside text, look-alikes of byte and metaspace tokens, and random code points
from every plane (valid UTF-8 only: tokenizers take str).
"""
import random

_WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have from or one had by "
          "word but not what all were we when your can said there use an each which she do how their if will up "
          "Hello World résumé naïve café über Straße Ölfeld ſtraße Kelvin ΚΑΛΗΜΕΡΑ καλημέρα Привет мир "
          "שלום مرحبا नमस्ते สวัสดี Việt Nam").split()
_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "\u2019s")
_CODE = [
    "def {n}(x, y=None):\n    return x ** 2 + {d}\n",
    "for (int i = 0; i < {d}; ++i) {{\n\tsum += a[i] * b[i];\n}}\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "const {n} = async () => {{ await fetch('/api/{n}?q={d}'); }};\n",
    "#include <vector>\nstd::vector<int> {n}({d}, -1);\n",
    "SELECT * FROM t WHERE id = {d} AND name LIKE '%{n}%';\n",
    "    \t  // TODO({n}): handle {d}  \r\n",
    "<div class=\"{n}\">{d}</div>\n",
    "x = [{d}, 0x{d:X}, 1e-{d}, {d}.5f]\n",
]
_EMOJI = ["🦙", "🚀", "😶\u200d🌫️", "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👍🏽", "🇫🇷", "🇯🇵", "✅", "❤️", "🧑🏿\u200d💻",
          "👩\u200d❤️\u200d💋\u200d👨", "#️⃣", "1️⃣", "😁", "🫠"]
_SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u180e", "\u200b", "\u2003",
           "\u0085", "\x0b", "\x0c", " \n ", "\t\t\n"]
_DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३", "０１２３", "²³¹", "½¼", "Ⅻ", "𝟘𝟙𝟚"]
_ODD = ["\ufffd", "\ufeff", "\uffff", "\ufffe", "\x00", "\x01", "\x7f", "\u0080", "\u009f", "<0x41>", "<0xE4>",
        "Ġ", "Ċ", "▁", "▁▁", "\U000e0041", "\U0010ffff", "\ue000", "ǅ", "ﬁ", "İ"]


def _random_code_point(rng):
    while True:
        plane = rng.choice((0, 0, 0, 1, 2, 14, 15, 16))
        cp = plane * 0x10000 + rng.randrange(0x10000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _cjk(rng, n):
    ranges = ((0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x3400, 0x4DBF), (0xFF01, 0xFF5E))
    out = []
    for _ in range(n):
        a, b = rng.choice(ranges)
        out.append(chr(rng.randint(a, b)))
    return "".join(out)


def _combining(rng, n):
    bases = "aeiouAEOnNcCgs" + "कखगตกअ"
    return "".join(rng.choice(bases) + "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(rng.randint(0, 3)))
                   + rng.choice(("", "\u093f", "\u0e34", "\u0301"))
                   for _ in range(n))


def _fragment(rng, specials):
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice(_CODE).format(n=rng.choice(("foo", "bar_baz", "x1", "Ärger")), d=rng.randrange(10 ** 6))
    if kind == 1:
        return " ".join(rng.choice(_WORDS) + (rng.choice(_CONTRACTIONS) if rng.random() < 0.2 else "")
                        for _ in range(rng.randint(1, 12))) + rng.choice((".", ",", "!", "?", "", "...", " —"))
    if kind == 2:
        return _cjk(rng, rng.randint(1, 30))
    if kind == 3:
        return "".join(rng.choice(_EMOJI) for _ in range(rng.randint(1, 5)))
    if kind == 4:
        return _combining(rng, rng.randint(1, 10))
    if kind == 5:
        return "".join(rng.choice(_SPACES) for _ in range(rng.randint(1, 6)))
    if kind == 6:
        return rng.choice(_DIGITS) if rng.random() < 0.3 else str(rng.randrange(10 ** rng.randint(1, 15)))
    if kind == 7 and specials:
        return rng.choice(specials)
    if kind == 8:
        return rng.choice(_ODD)
    if kind == 9:
        return "".join(_random_code_point(rng) for _ in range(rng.randint(1, 8)))
    if kind == 10:
        return rng.choice(_SPACES) * rng.randint(1, 40)
    return rng.choice(("!!!!", "...", "''", "\"", "(", ")", "{{", "}}", "--", "==>", "</s>", "<s>", "<|", "|>", "\\n"))


def documents(total_bytes, seed=0, specials=()):
    """Documents of up to ~4 KB whose UTF-8 adds up to about `total_bytes`."""
    rng = random.Random(seed)
    specials = list(specials)
    docs, size = [], 0
    while size < total_bytes:
        parts = [_fragment(rng, specials) for _ in range(rng.choice((1, 2, 5, 20, 60)))]
        sep = rng.choice(("", " ", "\n"))
        doc = sep.join(parts)
        docs.append(doc)
        size += len(doc.encode("utf-8"))
    return docs
