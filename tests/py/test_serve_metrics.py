"""test_serve_metrics.py — `assay serve`'s /metrics after a known set of requests, read with a strict parser of the
Prometheus text format (every sample in a family declared by # HELP and # TYPE, labels well formed, no duplicate
series; histograms with cumulative buckets in increasing `le` ending with +Inf = _count): vLLM's histograms with
vLLM's buckets and the counts those requests must give, the request counters agreeing with them, and the info
gauges carrying the quantization and KV dtype (a second server with --quantization fp8 --kv-cache-dtype fp8).
`promtool check metrics` (Debian's prometheus package) must find no problem except the ':' that vLLM's metric
names contain."""
import json
import math
import re
import shutil
import subprocess

import testlib
from testlib import check, finish
from servelib import NAME, http, start, stop

TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
        80.0, 160.0, 640.0, 2560.0]
ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
REQ = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
       960.0, 1920.0, 7680.0]
TOK = [1, 2, 5, 10, 20, 50, 100, 200]  # 1-2-5 up to --max-model-len 256
HISTOGRAMS = {"vllm:time_to_first_token_seconds": TTFT, "vllm:inter_token_latency_seconds": ITL,
              "vllm:e2e_request_latency_seconds": REQ, "vllm:request_queue_time_seconds": REQ,
              "vllm:request_prompt_tokens": TOK, "vllm:request_generation_tokens": TOK}

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


class ParseError(Exception):
    pass


def parse_value(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise ParseError(f"bad value {s!r}")
    return float(s)


def parse_labels(s):
    """'a="x",b="y"' -> {"a": "x", "b": "y"}; anything else is an error."""
    out, pos = {}, 0
    while pos < len(s):
        m = LABEL_RE.match(s, pos)
        if not m:
            raise ParseError(f"bad labels at {s[pos:]!r}")
        if m.group(1) in out:
            raise ParseError(f"label {m.group(1)} twice")
        out[m.group(1)] = m.group(2).replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        pos = m.end()
        if pos < len(s):
            if s[pos] != ",":
                raise ParseError(f"expected ',' in {s!r}")
            pos += 1
    return out


def parse(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}}, strictly."""
    fams, current = {}, None
    if not text.endswith("\n"):
        raise ParseError("the exposition must end with a newline")
    for ln, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME_RE.fullmatch(name):
                    raise ParseError(f"line {ln}: bad name {name!r}")
                f = fams.setdefault(name, {"type": None, "help": None, "samples": []})
                key = parts[1].lower()
                if f[key] is not None:
                    raise ParseError(f"line {ln}: second {parts[1]} for {name}")
                if f["samples"]:
                    raise ParseError(f"line {ln}: {parts[1]} after {name}'s samples")
                if key == "type" and (len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped")):
                    raise ParseError(f"line {ln}: bad TYPE line")
                f[key] = parts[3] if len(parts) == 4 else ""
                current = name
            continue
        if not line:
            raise ParseError(f"line {ln}: empty line")
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        if not m:
            raise ParseError(f"line {ln}: not a sample: {line!r}")
        name, labels, value = m.group(1), parse_labels(m.group(2) or ""), parse_value(m.group(3))
        fam = current
        f = fams.get(fam)
        if f is None or f["type"] is None or f["help"] is None:
            raise ParseError(f"line {ln}: {name} outside a family with HELP and TYPE")
        allowed = {fam} if f["type"] in ("counter", "gauge", "untyped") else \
            {fam + "_bucket", fam + "_sum", fam + "_count"}
        if name not in allowed:
            raise ParseError(f"line {ln}: sample {name} in family {fam} ({f['type']})")
        if f["type"] == "counter" and not name.endswith("_total"):
            raise ParseError(f"line {ln}: counter {name} without _total")
        key = (name, tuple(sorted(labels.items())))
        if any((n, tuple(sorted(l.items()))) == key for n, l, _ in f["samples"]):
            raise ParseError(f"line {ln}: duplicate series {line!r}")
        f["samples"].append((name, labels, value))
    for name, f in fams.items():
        if f["type"] == "histogram":
            check_histogram(name, f["samples"])
    return fams


def check_histogram(name, samples):
    """Per label set: le strictly increasing, last +Inf, counts non-decreasing, +Inf == _count, _sum present."""
    series = {}
    for n, labels, v in samples:
        rest = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        s = series.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if n.endswith("_bucket"):
            if "le" not in labels:
                raise ParseError(f"{n} without le")
            s["buckets"].append((parse_value(labels["le"]), v))
        elif n.endswith("_sum"):
            s["sum"] = v
        else:
            s["count"] = v
    for rest, s in series.items():
        b = s["buckets"]
        if not b or s["sum"] is None or s["count"] is None:
            raise ParseError(f"{name}{rest}: buckets, _sum and _count are all required")
        if b[-1][0] != math.inf:
            raise ParseError(f"{name}{rest}: the last bucket is not +Inf")
        if any(b[i][0] >= b[i + 1][0] for i in range(len(b) - 1)):
            raise ParseError(f"{name}{rest}: le not increasing")
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            raise ParseError(f"{name}{rest}: bucket counts not cumulative")
        if b[-1][1] != s["count"]:
            raise ParseError(f"{name}{rest}: +Inf bucket {b[-1][1]} != _count {s['count']}")


def value(fams, name, **labels):
    want = {"model_name": NAME, **labels}
    for n, l, v in fams[name]["samples"]:
        if n == name and l == want:
            return v
    raise KeyError(name)


def histo(fams, name):
    """(bounds without +Inf, cumulative counts with +Inf, sum, count) of the model_name series."""
    b, s, c = [], None, None
    for n, l, v in fams[name]["samples"]:
        if l.get("model_name") != NAME:
            continue
        if n.endswith("_bucket"):
            b.append((parse_value(l["le"]), v))
        elif n.endswith("_sum"):
            s = v
        else:
            c = v
    return [x for x, _ in b[:-1]], [v for _, v in b], s, c


def promtool(text):
    exe = shutil.which("promtool")
    if not exe:
        print("promtool not found (Debian's prometheus package): skipping promtool check metrics")
        return
    p = subprocess.run([exe, "check", "metrics"], input=text, capture_output=True, text=True)
    problems = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    other = [l for l in problems if not l.endswith("metric names should not contain ':'")]
    check(p.returncode in (0, 3) and not other, f"promtool check metrics: rc {p.returncode}: {other[:5]}")


# the parser itself refuses what it must
for bad in ['# HELP a x\n# TYPE a gauge\na{b="1} 1\n', 'a 1\n', '# HELP h x\n# TYPE h histogram\nh_bucket{le="1.0"} 2\n'
            'h_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', '# HELP a_total x\n# TYPE a_total counter\na_total 1\na_total 2\n']:
    try:
        parse(bad)
        check(False, f"the parser refuses {bad!r}")
    except ParseError:
        pass

proc, base = start()
try:
    if base is None:
        raise SystemExit
    h = {"Content-Type": "application/json"}
    ok = True
    prompts = ["The house", "A door of the house stood", "Windows"]
    max_tokens = [5, 7, 9]
    n_prompt = [json.loads(http("POST", base + "/tokenize", {"prompt": p})[1])["count"] for p in prompts]
    for p, n in zip(prompts, max_tokens):
        st, body = http("POST", base + "/v1/completions", {"model": NAME, "prompt": p, "max_tokens": n,
                                                            "temperature": 0, "ignore_eos": True}, h)
        ok &= st == 200 and json.loads(body)["usage"]["completion_tokens"] == n
    st, body = http("POST", base + "/v1/completions", {"model": NAME, "prompt": prompts[0], "max_tokens": 6,
                                                        "stream": True, "ignore_eos": True}, h)
    ok &= st == 200 and body.rstrip().endswith("data: [DONE]")
    check(ok, "four requests answered")
    st, text = http("GET", base + "/metrics")
    try:
        fams = parse(text)
        check(True, "")
    except ParseError as e:
        check(False, f"/metrics parses strictly: {e}")
        raise SystemExit
    promtool(text)

    for name, bounds in HISTOGRAMS.items():
        f = fams.get(name)
        if not check(f is not None and f["type"] == "histogram", f"{name} is a histogram"):
            continue
        le, cum, s, c = histo(fams, name)
        check(le == bounds, f"{name} buckets {le} == vLLM's {bounds}")
    gen = sum(max_tokens) + 6
    _, cum, s, c = histo(fams, "vllm:e2e_request_latency_seconds")
    check(c == 4 and s > 0, f"e2e: 4 requests, sum > 0 ({c}, {s})")
    _, cum, s, c = histo(fams, "vllm:time_to_first_token_seconds")
    check(c == 4 and 0 < s, f"TTFT: 4 ({c}, {s})")
    _, cum, s, c = histo(fams, "vllm:inter_token_latency_seconds")
    check(c == gen - 4 and s > 0, f"ITL: one per token after the first: {c} == {gen - 4}")
    _, cum, s, c = histo(fams, "vllm:request_queue_time_seconds")
    check(c == 4 and s >= 0, f"queue time: 4 ({c}, {s})")
    _, cum, s, c = histo(fams, "vllm:request_generation_tokens")
    check(c == 4 and s == gen, f"generation tokens: 4 requests, {gen} tokens ({c}, {s})")
    check(cum[TOK.index(5)] == 1 and cum[TOK.index(10)] == 4, f"generation tokens by bucket: {cum}")
    _, cum, s, c = histo(fams, "vllm:request_prompt_tokens")
    check(c == 4 and s == sum(n_prompt) + n_prompt[0], f"prompt tokens: {s} == {sum(n_prompt) + n_prompt[0]}")
    succ = sum(value(fams, "vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "abort"))
    check(succ == 4, f"vllm:request_success_total sums to the e2e count: {succ}")
    check(value(fams, "vllm:generation_tokens_total") == gen, "vllm:generation_tokens_total == the generation histogram's sum")
    info = [l for n, l, v in fams["assay:engine_config_info"]["samples"] if v == 1]
    check(len(info) == 1 and info[0].get("quantization") == "None" and info[0].get("kv_cache_dtype") == "f16",
          f"assay:engine_config_info {info}")
    cache = [l for n, l, v in fams["vllm:cache_config_info"]["samples"] if v == 1]
    check(len(cache) == 1 and cache[0].get("cache_dtype") == "f16" and cache[0].get("block_size") == "16",
          f"vllm:cache_config_info {cache}")
finally:
    stop(proc, testlib.failures > 0)

# the same server with FP8 weights and an FP8 KV cache says so
proc, base = start(["--quantization", "fp8", "--kv-cache-dtype", "fp8"])
try:
    if base is not None:
        fams = parse(http("GET", base + "/metrics")[1])
        info = [l for n, l, v in fams["assay:engine_config_info"]["samples"]]
        check(len(info) == 1 and info[0].get("quantization") == "fp8" and info[0].get("kv_cache_dtype") == "fp8_e4m3",
              f"fp8: assay:engine_config_info {info}")
        cache = [l for n, l, v in fams["vllm:cache_config_info"]["samples"]]
        check(len(cache) == 1 and cache[0].get("cache_dtype") == "fp8_e4m3", f"fp8: vllm:cache_config_info {cache}")
finally:
    stop(proc, testlib.failures > 0)
finish("serve metrics")
