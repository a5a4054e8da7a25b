"""Pre-tokenizer families without a vocab file here (Llama 3, Qwen2, GPT-4o, Tekken, ...): for every
tokenizer.ggml.pre name in transformers' own GGUF table (GGUF_PRE_TOKENIZER_SPLITS, an independent source of
each family's split regex), a vocab-only GGUF is written with gguf-py from the house vocabulary and merges
under that name, and `assay tokenize` on it must give the ids of HF tokenizers running the same vocabulary
with that family's pipeline (Split(regex, isolated) then ByteLevel without regex, ignore_merges where the
family's tokenizer.json sets it), on llama.cpp's fixture strings, adversarial strings and WikiText-2/heldout
excerpts (joined by <|endoftext|>, one run per family). A name assay does not know must fail with a message naming it, never tokenize silently."""
import json
import os
import subprocess
import sys

import gguf
from tokenizers import Regex, Tokenizer, pre_tokenizers
from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

from tok_cases import ADVERSARIAL, Assay, Failures, fixture_strings
from testlib import scratch_dir  # noqa: E402

SHARED = os.environ["ASSAY_SHARED"]
HOUSE = os.path.join(SHARED, "models", "house")
fail = Failures()
tmp = scratch_dir(prefix="assay_fam_")

spec = json.load(open(os.path.join(HOUSE, "tokenizer.json")))
vocab = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
tokens = [t for t, _ in vocab]
merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
IGNORE_MERGES = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "tekken"}

texts = ADVERSARIAL + fixture_strings(SHARED)
wiki = open(os.path.join(SHARED, "data", "wikitext2_raw", "wiki.test.raw"), encoding="utf-8").read()
held = open(os.path.join(HOUSE, "heldout.txt"), encoding="utf-8").read()
texts += [wiki[:200000], held[:100000]]


def write_vocab_gguf(path, pre):
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if i == 0 else gguf.TokenType.NORMAL for i in range(len(tokens))])
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


n_checked = n_unknown = 0
for pre, split in sorted(GGUF_PRE_TOKENIZER_SPLITS.items()):
    path = os.path.join(tmp, f"vocab-{pre}.gguf")
    write_vocab_gguf(path, pre)
    ref = Tokenizer.from_file(os.path.join(HOUSE, "tokenizer.json"))
    ref.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if pre in IGNORE_MERGES:
        ref.model.ignore_merges = True
    probe = subprocess.run([os.environ["ASSAY_BIN"], "tokenize", path, "x", "--ids"], capture_output=True, text=True)
    if probe.returncode != 0:
        if f"'{pre}'" not in probe.stderr:
            fail(f"{pre}: failed without naming the pre-tokenizer: {probe.stderr.strip()}")
        print(f"{pre}: not supported by assay ({probe.stderr.strip()})")
        n_unknown += 1
        continue
    # One run per family: the texts joined by the special token <|endoftext|> (id 0), which both sides match
    # before pre-tokenization, so each text is still tokenized on its own.
    want = []
    for i, s in enumerate(texts):
        want += ([0] if i else []) + ref.encode(s, add_special_tokens=False).ids
    ok = fail.compare(f"{pre}", Assay(path).ids("<|endoftext|>".join(texts).encode("utf-8")), want)
    n_checked += 1
    print(f"{pre}: {len(texts)} texts, {len(want)} tokens, {'equal' if ok else 'DIFFERENT'}")

print(f"{n_checked} families checked, {n_unknown} refused by name; {fail.n} failures")
sys.exit(1 if fail.n or n_checked < 10 else 0)
