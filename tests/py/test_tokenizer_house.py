"""The house model's tokenizer.json: `assay tokenize` must give the ids of the Hugging Face `tokenizers`
package (PyPI) on the whole WikiText-2 test file, on heldout.txt and on adversarial strings, and
`assay detokenize` must give back the exact input bytes.

Input that is not valid UTF-8 cannot be given to `tokenizers` (it takes str). For it the reference is built
from HF's own parts: the pre-tokenizer runs on the text with each invalid byte replaced by U+FFFD (the rule
assay documents), the pieces are mapped back to the original bytes, and HF's BPE model encodes each piece
in the byte alphabet. The same construction is checked against tokenizer.encode on valid text first."""
import os
import sys

from tokenizers import Tokenizer

from tok_cases import ADVERSARIAL, INVALID, Assay, Failures, bytes_to_unicode, fixture_strings
from testlib import scratch_dir  # noqa: E402

SHARED = os.environ["ASSAY_SHARED"]
BIN = os.environ["ASSAY_BIN"]
HOUSE = os.path.join(SHARED, "models", "house")
tok = Tokenizer.from_file(os.path.join(HOUSE, "tokenizer.json"))
assay = Assay(HOUSE)
fail = Failures()
B2U = bytes_to_unicode()


def reference_from_parts(data: bytes):
    """HF pre-tokenizer + HF BPE model on raw bytes; invalid bytes are U+FFFD for pre-tokenization only."""
    chars, spans, i = [], [], 0
    while i < len(data):
        for l in (1, 2, 3, 4):
            try:
                ch = data[i:i + l].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1:
                break
        else:
            ch, l = "\ufffd", 1
        chars.append(ch)
        spans.append((i, i + l))
        i += l
    text = "".join(chars)
    ids, pos = [], 0
    for _piece, (s, e) in tok.pre_tokenizer.pre_tokenize_str(text):
        assert s == pos, "pieces must tile the text"
        pos = e
        raw = b"".join(data[a:b] for a, b in spans[s:e])
        ids += [t.id for t in tok.model.tokenize("".join(B2U[b] for b in raw))]
    assert pos == len(text)
    return ids


def check(name, data: bytes, expected):
    got = assay.ids(data)
    if not fail.compare(name, got, expected):
        return
    back = assay.text(got)
    if back != data:
        k = next((i for i, (x, y) in enumerate(zip(back, data)) if x != y), min(len(back), len(data)))
        fail(f"{name}: detokenize(tokenize(x)) != x at byte {k}: {back[k:k + 20]!r} vs {data[k:k + 20]!r}")


# 1. Whole files.
for name, path in [("wikitext-2 test", os.path.join(SHARED, "data", "wikitext2_raw", "wiki.test.raw")),
                   ("heldout.txt", os.path.join(HOUSE, "heldout.txt"))]:
    data = open(path, "rb").read()
    expected = tok.encode(data.decode("utf-8"), add_special_tokens=False).ids
    check(name, data, expected)
    print(f"{name}: {len(data)} bytes, {len(expected)} tokens")

# 2. Adversarial valid strings, and llama.cpp's fixture strings.
adversarial = ADVERSARIAL + fixture_strings(SHARED)
for i, s in enumerate(adversarial):
    data = s.encode("utf-8")
    expected = tok.encode(s, add_special_tokens=False).ids
    check(f"adversarial[{i}] {s[:20]!r}", data, expected)
    if "<|endoftext|>" not in s:
        parts = reference_from_parts(data)
        if parts != expected:
            fail(f"reference construction disagrees with tokenizer.encode on {s[:20]!r}")

# 3. Invalid UTF-8.
invalid = INVALID
for i, data in enumerate(invalid):
    check(f"invalid[{i}] {data[:20]!r}", data, reference_from_parts(data))

# 4. The NFC normalizer (Qwen2's tokenizer.json has one): the house vocabulary behind an NFC normalizer must
#    give HF's ids on decomposed text (e + U+0301 -> é, Hangul jamo -> syllables, ...).
import json  # noqa: E402

spec = json.load(open(os.path.join(HOUSE, "tokenizer.json")))
spec["normalizer"] = {"type": "NFC"}
nfc_dir = scratch_dir(prefix="assay_nfc_")
with open(os.path.join(nfc_dir, "tokenizer.json"), "w") as f:
    json.dump(spec, f)
nfc_tok = Tokenizer.from_file(os.path.join(nfc_dir, "tokenizer.json"))
nfc_assay = Assay(nfc_dir)
decomposed = ["e\u0301te\u0301", "A\u030angstro\u0308m", "\u1100\u1161\u11a8 \u1112\u1161\u11ab", "n\u0303 o\u0302\u0323",
              "\u2126 ohm \u212b angstrom", "a\u0301\u0301\u0301", "ﬁ ligature stays", "\u0915\u093c devanagari nukta"]
for i, s in enumerate(decomposed + adversarial[:60]):
    fail.compare(f"nfc[{i}] {s[:20]!r}", nfc_assay.ids(s.encode("utf-8")), nfc_tok.encode(s, add_special_tokens=False).ids)

print(f"{len(adversarial)} adversarial, {len(invalid)} invalid-UTF-8 strings; {fail.n} failures")
sys.exit(1 if fail.n else 0)
