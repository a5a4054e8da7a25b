"""tokenizer.json with SentencePiece-style BPE (characters, U+2581 for spaces, <0xXX> byte fallback), the two
pipelines HF uses for it: Metaspace (prepend_scheme "first") as in Llama, and Prepend + Replace normalizers as
in Phi-3. The files are produced by transformers' GGUF tokenizer builders from llama.cpp's llama-spm and phi-3
vocabularies and saved with tokenizers; `assay tokenize` on them must give HF's ids on fixture, adversarial and
WikiText-2 text, and `assay detokenize` must give HF's decode of those ids."""
import os
import sys

from gguf import GGUFReader
from tokenizers import Tokenizer
from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

from tok_cases import ADVERSARIAL, Assay, Failures, fixture_strings
from testlib import scratch_dir  # noqa: E402

SHARED = os.environ["ASSAY_SHARED"]
fail = Failures()
tmp = scratch_dir(prefix="assay_spmjson_")
wiki = open(os.path.join(SHARED, "data", "wikitext2_raw", "wiki.test.raw"), encoding="utf-8").read()
texts = ADVERSARIAL + fixture_strings(SHARED) + [wiki[:100000]]

for vocab in ["llama-spm", "phi-3"]:
    md = {k: f.contents() for k, f in GGUFReader(os.path.join(SHARED, "data", "llamacpp_vocab", f"ggml-vocab-{vocab}.gguf")).fields.items()
          if k.startswith("tokenizer.") or k == "general.architecture"}
    td = {n: md[f"tokenizer.{k}"] for k, n in GGUF_TOKENIZER_MAPPING["tokenizer"].items() if f"tokenizer.{k}" in md}
    arch = "phi3" if vocab == "phi-3" else md["general.architecture"]
    backend, _ = convert_gguf_tokenizer(arch, td)
    d = os.path.join(tmp, vocab)
    os.makedirs(d)
    path = os.path.join(d, "tokenizer.json")
    backend.save(path)
    hf = Tokenizer.from_file(path)
    assay = Assay(d)
    n_ok = 0
    for i, s in enumerate(texts):
        want = hf.encode(s, add_special_tokens=False).ids
        got = assay.ids(s.encode("utf-8"))
        if fail.compare(f"{vocab} text {i} {s[:24]!r}", got, want):
            n_ok += 1
            text = assay.text(got).decode("utf-8", errors="replace")
            if text != hf.decode(want, skip_special_tokens=False):
                fail(f"{vocab} text {i} {s[:24]!r}: detokenize differs from HF decode: {text[:40]!r} vs {hf.decode(want)[:40]!r}")
    print(f"{vocab} ({'Prepend+Replace' if vocab == 'phi-3' else 'Metaspace'}): {n_ok}/{len(texts)} texts equal")

print(f"{fail.n} failures")
sys.exit(1 if fail.n else 0)
