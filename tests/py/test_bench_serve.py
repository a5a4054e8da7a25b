"""test_bench_serve.py — `assay bench-serve` against `assay serve` on the house model: the random dataset (8 prompts of
32 tokens, 16 output tokens with --ignore-eos, 4 in flight) all succeed; the summary block has vLLM's lines and
agrees with the result file; the file has vLLM's keys, and its statistics are those of its own per-request lists
(numpy's mean / median / linear p99); the server's own counters saw the same requests and tokens; the server's -v
describes its engine. Then openai-chat with a ShareGPT file at a Poisson rate, and a wrong model name failing with
exit 1. Last, a stand-in server with llama-server's request shapes (its /tokenize answers vLLM's body, which has no
"content", with 200 and no tokens): the random prompts still have their exact lengths, cut with llama-server's own
/tokenize and /detokenize, in at most 3 calls a prompt (before the fix: /tokenize called forever, with ever longer
texts). Then the same stand-in stalling: nothing waits forever, each phase ends within its limit with the reason
(a streamed request that stops sending fails after --request-timeout and the others complete; an initial test
request that does not end fails after --ready-check-timeout-sec; a /tokenize that stops answering ends the
preparation of the prompts with exit 1)."""
import json
import os
import re
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import testlib
from testlib import check, finish, scratch_dir
from servelib import BIN, NAME, http, start, stop

KEYS = ["date", "backend", "model_id", "num_prompts", "request_rate", "max_concurrency", "duration", "completed",
        "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput", "total_token_throughput",
        "input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"] + \
       [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "std", "p99")]
LINES = ["Successful requests:", "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
         "Request throughput (req/s):", "Output token throughput (tok/s):", "Total Token throughput (tok/s):"] + \
        [f"{s} {m} (ms):" for m in ("TTFT", "TPOT", "ITL", "E2EL") for s in ("Mean", "Median", "P99")]


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return 0.0
    pos = p / 100 * (len(xs) - 1)
    lo = int(pos)
    return xs[lo] if lo + 1 >= len(xs) else xs[lo] + (xs[lo + 1] - xs[lo]) * (pos - lo)


def counter(base, name, **labels):
    text = http("GET", base + "/metrics")[1]
    want = ",".join([f'model_name="{NAME}"'] + [f'{k}="{v}"' for k, v in labels.items()])
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.split()[-1])
    return None


def bench(base, *args):
    return subprocess.run([BIN, "bench-serve", "--base-url", base, *args], capture_output=True, text=True, timeout=120)


tmp = scratch_dir("bench-serve-")
proc, base = start(["--chat-template", "chatml", "-v"])
try:
    if base is None:
        raise SystemExit
    gen0 = counter(base, "vllm:generation_tokens_total")
    done0 = counter(base, "vllm:request_success_total", finished_reason="length")
    out = os.path.join(tmp, "r.json")
    p = bench(base, "--num-prompts", "8", "--max-concurrency", "4", "--random-input-len", "32", "--random-output-len",
              "16", "--ignore-eos", "--result-file", out)
    check(p.returncode == 0, f"bench-serve exit {p.returncode}: {p.stderr[-2000:]}")
    r = json.load(open(out)) if os.path.exists(out) else {}
    check(all(k in r for k in KEYS), f"result keys: missing {[k for k in KEYS if k not in r]}")
    check(r.get("completed") == 8 and r.get("num_prompts") == 8 and r.get("max_concurrency") == 4 and
          r.get("request_rate") == "inf" and r.get("backend") == "openai" and r.get("model_id") == NAME,
          f"8 successes: {({k: r.get(k) for k in ('completed', 'num_prompts', 'max_concurrency', 'request_rate')})}")
    check(r.get("errors") == [""] * 8, f"no errors: {r.get('errors')}")
    check(r.get("input_lens") == [32] * 8 and r.get("total_input_tokens") == 256, f"input lens {r.get('input_lens')}")
    check(r.get("output_lens") == [16] * 8 and r.get("total_output_tokens") == 128, f"output lens {r.get('output_lens')}")
    check(all(t > 0 for t in r.get("ttfts", [0])) and all(len(x) <= 15 for x in r.get("itls", [])),
          "a TTFT per request, at most 15 ITLs each")
    d = r.get("duration", 0)
    check(d > 0 and abs(r["output_throughput"] - 128 / d) < 1e-6 * r["output_throughput"] and
          abs(r["total_token_throughput"] - 384 / d) < 1e-6 * r["total_token_throughput"] and
          abs(r["request_throughput"] - 8 / d) < 1e-6 * r["request_throughput"], "throughputs = totals / duration")
    ttfts = [x * 1000 for x in r.get("ttfts", [])]
    itls = [x * 1000 for xs in r.get("itls", []) for x in xs]
    for name, xs in (("ttft", ttfts), ("itl", itls)):
        mean = sum(xs) / len(xs) if xs else 0
        want = {"mean": mean, "median": pct(xs, 50), "p99": pct(xs, 99)}
        got = {k: r.get(f"{k}_{name}_ms") for k in want}
        check(all(got[k] is not None and abs(got[k] - want[k]) <= 1e-9 + 1e-9 * abs(want[k]) for k in want),
              f"{name} statistics {got} == those of the list {want}")
    check(r.get("mean_e2el_ms", 0) >= r.get("mean_ttft_ms", 1) and r.get("mean_tpot_ms", 0) > 0, "E2EL >= TTFT, TPOT > 0")
    # the summary block: vLLM's header and lines, in order, agreeing with the file
    text = p.stdout
    check("============ Serving Benchmark Result ============" in text, "summary header")
    pos = [text.find(l) for l in LINES]
    check(all(x >= 0 for x in pos) and pos == sorted(pos), f"summary lines in vLLM's order: {list(zip(LINES, pos))}")
    m = re.search(r"Successful requests:\s+(\d+)", text)
    check(m and int(m.group(1)) == 8, "Successful requests: 8")
    m = re.search(r"Total generated tokens:\s+(\d+)", text)
    check(m and int(m.group(1)) == 128, "Total generated tokens: 128")
    m = re.search(r"Mean TTFT \(ms\):\s+([\d.]+)", text)
    check(m and abs(float(m.group(1)) - r.get("mean_ttft_ms", -1)) <= 0.006, "Mean TTFT printed == the file's")
    # the server counted the same: 8 requests + the initial test request, 16 tokens each
    gen1 = counter(base, "vllm:generation_tokens_total")
    done1 = counter(base, "vllm:request_success_total", finished_reason="length")
    check(gen1 - gen0 == 9 * 16 and done1 - done0 == 9, f"server counters: {gen1 - gen0} tokens, {done1 - done0} requests")

    # openai-chat, ShareGPT file, Poisson arrivals
    sg = os.path.join(tmp, "sharegpt.json")
    json.dump([{"id": str(i), "conversations": [
        {"from": "human", "value": f"Tell me about room {i} of the house, its windows and its doors."},
        {"from": "gpt", "value": f"Room {i} has two windows and one door, and the floor is made of old oak."}]}
        for i in range(6)] + [{"id": "short", "conversations": [{"from": "human", "value": "hi"}]}], open(sg, "w"))
    out2 = os.path.join(tmp, "r2.json")
    p = bench(base, "--backend", "openai-chat", "--dataset-name", "sharegpt", "--dataset-path", sg, "--num-prompts",
              "4", "--request-rate", "50", "--seed", "1", "--result-file", out2)
    r2 = json.load(open(out2)) if os.path.exists(out2) else {}
    check(p.returncode == 0 and r2.get("completed") == 4 and r2.get("backend") == "openai-chat" and
          r2.get("request_rate") == 50, f"chat + sharegpt + rate 50: {p.returncode} {p.stderr[-1000:]}")
    check(all(x >= 4 for x in r2.get("input_lens", [0])) and all(x > 0 for x in r2.get("output_lens", [0])),
          f"sharegpt lens {r2.get('input_lens')} {r2.get('output_lens')}")

    # a wrong model name: the initial test request fails, exit 1 with the server's message
    p = bench(base, "--model", "nope", "--num-prompts", "2", "--random-input-len", "8", "--random-output-len", "4")
    check(p.returncode == 1 and "does not exist" in p.stderr, f"wrong model: {p.returncode} {p.stderr[-300:]}")
    p = bench(base, "--backend", "nope")
    check(p.returncode == 2, f"bad --backend: usage error {p.returncode}")
finally:
    log = stop(proc, testlib.failures > 0)
check(re.search(r"^assay serve: KV pool \d+ blocks of 16 tokens", log, re.M), f"serve -v describes the engine: {log[-500:]}")


class LlamaShaped(BaseHTTPRequestHandler):
    """llama-server's /v1/models, /tokenize, /detokenize and streamed /v1/completions, one token per word."""
    vocab, words, prompts, calls = {}, [], [], {}

    def log_message(self, *a):
        pass

    def reply(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stall(self, body):
        return False

    def do_GET(self):
        self.reply({"object": "list", "data": [{"id": "llama-shaped", "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.calls[self.path] = cls.calls.get(self.path, 0) + 1
        if self.stall(body):
            return
        if self.path == "/tokenize":  # llama-server: {"content"} or nothing, whatever else the body holds
            ids = [cls.vocab.setdefault(w, len(cls.vocab)) for w in body.get("content", "").split()]
            cls.words += [w for w in cls.vocab if cls.vocab[w] >= len(cls.words)]
            return self.reply({"tokens": ids})
        if self.path == "/detokenize":
            return self.reply({"content": " ".join(cls.words[i] for i in body.get("tokens", []))})
        cls.prompts.append(body["prompt"])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = body["max_tokens"]
        for i in range(n):
            self.wfile.write(b"data: " + json.dumps({"choices": [{"text": " w", "index": 0, "finish_reason": None}]}).encode() + b"\n\n")
        usage = {"completion_tokens": n, "prompt_tokens": len(body["prompt"].split()), "total_tokens": 0}
        self.wfile.write(b"data: " + json.dumps({"choices": [{"text": "", "index": 0, "finish_reason": "length"}],
                                                 "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")


fake = ThreadingHTTPServer(("127.0.0.1", 0), LlamaShaped)
threading.Thread(target=fake.serve_forever, daemon=True).start()
out3 = os.path.join(tmp, "r3.json")
try:
    p = bench(f"http://127.0.0.1:{fake.server_address[1]}", "--num-prompts", "3", "--random-input-len", "20",
              "--random-output-len", "5", "--ignore-eos", "--result-file", out3)
    r3 = json.load(open(out3)) if os.path.exists(out3) else {}
    check(p.returncode == 0 and r3.get("completed") == 3, f"llama-server shapes: {p.returncode} {p.stderr[-500:]}")
    check(r3.get("input_lens") == [20] * 3 and r3.get("output_lens") == [5] * 3,
          f"llama-server shapes: lens {r3.get('input_lens')} {r3.get('output_lens')}")
    check(len(LlamaShaped.prompts) == 4 and all(len(x.split()) == 20 for x in LlamaShaped.prompts),
          f"prompts of 20 tokens sent: {[len(x.split()) for x in LlamaShaped.prompts]}")
    # per prompt: /tokenize, /detokenize, /tokenize of the cut; and vLLM's bodies tried once each
    check(LlamaShaped.calls.get("/tokenize") == 2 * 3 + 1 and LlamaShaped.calls.get("/detokenize") == 3 + 1,
          f"/tokenize and /detokenize calls: {LlamaShaped.calls}")
except subprocess.TimeoutExpired:
    check(False, "bench-serve against llama-server's /tokenize shape did not finish in 120 s")
fake.shutdown()


class Stalling(LlamaShaped):
    """The stand-in, stalling where `mode` says: "stream" (every second streamed request after the initial test one
    sends a first chunk, then nothing), "test" (every streamed request does), "tokenize" (/tokenize answers twice,
    then sends nothing)."""
    vocab, words, prompts, calls, mode, release = {}, [], [], {}, "", threading.Event()

    def stall(self, body):
        cls = Stalling
        n = cls.calls[self.path]
        if self.path == "/tokenize":
            if cls.mode != "tokenize" or n <= 2:
                return False
        elif self.path != "/v1/completions" or not (cls.mode == "test" or (cls.mode == "stream" and n > 1 and n % 2 == 0)):
            return False
        if self.path == "/v1/completions":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"data: " + json.dumps({"choices": [{"text": " w", "index": 0}]}).encode() + b"\n\n")
        cls.release.wait(60)  # then the connection closes (bench-serve has given up on it by then)
        return True


def stalled(mode, *args):
    Stalling.mode, Stalling.calls = mode, {}
    Stalling.release.clear()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    t0 = time.time()
    try:
        p = bench(f"http://127.0.0.1:{srv.server_address[1]}", "--random-input-len", "20", "--random-output-len", "5",
                  "--ignore-eos", *args)
    except subprocess.TimeoutExpired:
        p = None
    Stalling.release.set()
    srv.shutdown()
    return p, time.time() - t0


out4 = os.path.join(tmp, "r4.json")
p, dt = stalled("stream", "--num-prompts", "4", "--max-concurrency", "4", "--request-timeout", "2", "--result-file", out4)
r4 = json.load(open(out4)) if os.path.exists(out4) else {}
errs = r4.get("errors", [])
check(p is not None and p.returncode == 0 and r4.get("completed") == 2 and r4.get("failed") == 2 and dt < 30,
      f"stalled streams: exit {p and p.returncode}, {r4.get('completed')} completed, {dt:.1f} s: {p and p.stderr[-500:]}")
check(sum("--request-timeout" in e for e in errs) == 2 and sum(e == "" for e in errs) == 2,
      f"stalled streams: their errors name --request-timeout: {errs}")
p, dt = stalled("test", "--num-prompts", "2", "--ready-check-timeout-sec", "2", "--request-timeout", "30")
check(p is not None and p.returncode == 1 and "initial test request" in p.stderr and
      "--ready-check-timeout-sec" in p.stderr and dt < 20,
      f"a stalled initial test request: exit {p and p.returncode} after {dt:.1f} s: {p and p.stderr[-500:]}")
p, dt = stalled("tokenize", "--num-prompts", "3", "--request-timeout", "2")
check(p is not None and p.returncode == 1 and "preparing prompt 1 of 3" in p.stderr and "/tokenize" in p.stderr and
      "--request-timeout" in p.stderr and dt < 20,
      f"a stalled /tokenize: exit {p and p.returncode} after {dt:.1f} s: {p and p.stderr[-500:]}")
finish("bench-serve")
