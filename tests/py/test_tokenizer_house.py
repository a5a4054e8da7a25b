"""The house model's tokenizer.json: `assay tokenize` must give the ids of the Hugging Face `tokenizers`
package (PyPI) on the whole WikiText-2 test file, on heldout.txt and on adversarial strings, and
`assay detokenize` must give back the exact input bytes.

Input that is not valid UTF-8 cannot be given to `tokenizers` (it takes str). For it the reference is built
from HF's own parts: the pre-tokenizer runs on the text with each invalid byte replaced by U+FFFD (the rule
assay documents), the pieces are mapped back to the original bytes, and HF's BPE model encodes each piece
in the byte alphabet. The same construction is checked against tokenizer.encode on valid text first."""
import os
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer

SHARED = os.environ["ASSAY_SHARED"]
BIN = os.environ["ASSAY_BIN"]
HOUSE = os.path.join(SHARED, "models", "house")
tok = Tokenizer.from_file(os.path.join(HOUSE, "tokenizer.json"))
failures = 0
tmp = tempfile.mkdtemp(prefix="assay_tok_")


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def assay_ids(data: bytes):
    path = os.path.join(tmp, "in.txt")
    with open(path, "wb") as f:
        f.write(data)
    out = subprocess.run([BIN, "tokenize", HOUSE, "-f", path, "--ids"], capture_output=True, check=True)
    return [int(x) for x in out.stdout.split()]


def assay_text(ids):
    path = os.path.join(tmp, "ids.txt")
    with open(path, "w") as f:
        f.write(" ".join(map(str, ids)))
    return subprocess.run([BIN, "detokenize", HOUSE, "-f", path], capture_output=True, check=True).stdout


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


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
    got = assay_ids(data)
    if got != expected:
        k = first_diff(got, expected)
        fail(f"{name}: ids differ at {k} of {len(expected)}: assay {got[max(0, k - 3):k + 5]} hf {expected[max(0, k - 3):k + 5]}")
        return
    back = assay_text(got)
    if back != data:
        k = first_diff(back, data)
        fail(f"{name}: detokenize(tokenize(x)) != x at byte {k}: {back[k:k + 20]!r} vs {data[k:k + 20]!r}")


# 1. Whole files.
for name, path in [("wikitext-2 test", os.path.join(SHARED, "data", "wikitext2_raw", "wiki.test.raw")),
                   ("heldout.txt", os.path.join(HOUSE, "heldout.txt"))]:
    data = open(path, "rb").read()
    expected = tok.encode(data.decode("utf-8"), add_special_tokens=False).ids
    check(name, data, expected)
    print(f"{name}: {len(data)} bytes, {len(expected)} tokens")

# 2. Adversarial valid strings.
adversarial = [
    "", " ", "  ", "\n", "\n\n\n", "\t\t x", "\r\n\r\n", " \n \n ",
    "Hello world", " Hello", "  Hello", "Hello, y'all! How're you? I'M FINE'S 'll 've 'd",
    "нещо на Български", "กรุงเทพมหานคร", "中文测试，标点。", "日本語のテキスト", "한국어 텍스트", "مرحبا بالعالم", "שלום עולם",
    "Ελληνικά κείμενο", "हिन्दी पाठ", "mixed: abc中文123кириллица😀", "e\u0301 combining; Å vs A\u030a",
    "🦙🦙🦙", "😶‍🌫️ 👨‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇫🇷🇩🇪", "✅ ⚠️ ❤️",
    "\x00\x01\x02\x1b[31mred\x1b[0m\x7f", "tab\there\x0bvt\x0cff", "nbsp\u00a0here\u3000ideo\u2028ls\u0085nel\u200bzw",
    " " * 1000, "\n" * 500, "1" * 2000, "3.14159 2,718 1e10 0x1F", "a" * 3000, "a b " * 400,
    " \t \n" * 100, "x" + " " * 37 + "y", "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>",
    "<|endoftext|", "<|endoftext", " <|endoftext|> ", "&&&&&&!!!!!!??????......", "''''``````\"\"\"\"",
    "\ufeffBOM start", "\U0001d400\U0001d401 math", "ÿþ latin1 look-alikes ÄÖÜß",
]
for i, s in enumerate(adversarial):
    data = s.encode("utf-8")
    expected = tok.encode(s, add_special_tokens=False).ids
    check(f"adversarial[{i}] {s[:20]!r}", data, expected)
    if "<|endoftext|>" not in s:
        parts = reference_from_parts(data)
        if parts != expected:
            fail(f"reference construction disagrees with tokenizer.encode on {s[:20]!r}")

# 3. Invalid UTF-8.
invalid = [b"\xff", b"abc\xffdef", b" \xff", b"\xfe\xff  \xc0\xaf", b"truncated \xe2\x82", b"\xe2\x82a",
           b"\xed\xa0\x80 surrogate", b"\xf4\x90\x80\x80 too big", b"\xc3\x28 bad continuation",
           b"ok \xf0\x9f\x98 cut emoji", b"\x80\x80\x80", "héllo".encode() + b"\xa9 world \xe9t\xe9",
           b"\xf8\x88\x80\x80\x80 five-byte", b"  \xff\n\n\xfe12345"]
for i, data in enumerate(invalid):
    check(f"invalid[{i}] {data[:20]!r}", data, reference_from_parts(data))

print(f"{len(adversarial)} adversarial, {len(invalid)} invalid-UTF-8 strings; {failures} failures")
sys.exit(1 if failures else 0)
