"""Shared by the tokenizer tests: adversarial strings, invalid UTF-8 inputs, llama.cpp's fixture strings, and
helpers that run `assay tokenize` / `assay detokenize` on exact bytes."""
import os
import subprocess

from testlib import scratch_dir

ADVERSARIAL = [
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
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<bos><eos><pad><unk>", "<s></s><unk>", "[INST] hi [/INST]", "def f(x):\n    return x  # 4-space indent\n\ttab\n",
]

INVALID = [b"\xff", b"abc\xffdef", b" \xff", b"\xfe\xff  \xc0\xaf", b"truncated \xe2\x82", b"\xe2\x82a",
           b"\xed\xa0\x80 surrogate", b"\xf4\x90\x80\x80 too big", b"\xc3\x28 bad continuation",
           b"ok \xf0\x9f\x98 cut emoji", b"\x80\x80\x80", "héllo".encode() + b"\xa9 world \xe9t\xe9",
           b"\xf8\x88\x80\x80\x80 five-byte", b"  \xff\n\n\xfe12345"]


def fixture_strings(shared):
    """The test strings of llama.cpp's vocab fixtures (all .inp files), deduplicated, in order."""
    d = os.path.join(shared, "data", "llamacpp_vocab")
    seen, out = set(), []
    for name in sorted(os.listdir(d)):
        if name.endswith(".inp"):
            for s in open(os.path.join(d, name), encoding="utf-8").read().split("\n__ggml_vocab_test__\n"):
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


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


class Assay:
    def __init__(self, model):
        self.bin = os.environ["ASSAY_BIN"]
        self.model = model
        self.tmp = scratch_dir(prefix="assay_tok_")

    def ids(self, data: bytes, *flags):
        path = os.path.join(self.tmp, "in.txt")
        with open(path, "wb") as f:
            f.write(data)
        out = subprocess.run([self.bin, "tokenize", self.model, "-f", path, "--ids", *flags], capture_output=True, check=True)
        return [int(x) for x in out.stdout.split()]

    def text(self, ids, *flags):
        path = os.path.join(self.tmp, "ids.txt")
        with open(path, "w") as f:
            f.write(" ".join(map(str, ids)))
        return subprocess.run([self.bin, "detokenize", self.model, "-f", path, *flags], capture_output=True, check=True).stdout


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


class Failures:
    def __init__(self):
        self.n = 0

    def __call__(self, msg):
        self.n += 1
        print("FAIL:", msg)

    def compare(self, name, got, want):
        if got != want:
            k = first_diff(got, want)
            self(f"{name}: ids differ at {k} of {len(want)}: assay {got[max(0, k - 3):k + 5]} reference {want[max(0, k - 3):k + 5]}")
            return False
        return True
