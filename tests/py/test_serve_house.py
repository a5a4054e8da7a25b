"""test_serve_house.py — `assay serve` with the house model, driven by the openai client: greedy text equals
`assay run`, streaming equals non-streaming, concurrent requests equal the same request alone, logprobs, echo
scoring (max_tokens=0), /metrics, /v1/models, and bad requests answered with the right status while it keeps
serving. The server is stopped with SIGTERM at the end, whatever happened."""
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import openai

from testlib import check, finish

BIN = os.environ["ASSAY_BIN"]
MODEL = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")
KEY = "sk-assay-test"
NAME = "house"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


port = free_port()
base = f"http://127.0.0.1:{port}"
auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
proc = subprocess.Popen([BIN, "serve", MODEL, "--port", str(port), "--served-model-name", NAME, "--api-key", KEY,
                         "--max-model-len", "256", "--max-num-seqs", "8", "--threads", "2"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
try:
    for _ in range(300):
        if proc.poll() is not None:
            break
        try:
            if http("GET", base + "/health")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    if not check(proc.poll() is None and http("GET", base + "/health")[0] == 200, "server answers /health"):
        raise SystemExit

    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)
    prompt, n = "The house", 20

    # greedy completion == assay run (which prints the prompt, then the generation, then a newline)
    run = subprocess.run([BIN, "run", MODEL, "-p", prompt, "-n", str(n), "--temp", "0"], capture_output=True,
                         text=True, check=True).stdout
    expected = run[len(prompt):].rstrip("\n") if run.startswith(prompt) else None
    r = client.completions.create(model=NAME, prompt=prompt, max_tokens=n, temperature=0)
    text = r.choices[0].text
    check(expected is not None and text == expected, f"greedy text {text!r} == assay run's {expected!r}")
    check(r.usage.completion_tokens == n and r.usage.prompt_tokens > 0, f"usage {r.usage}")
    check(r.choices[0].finish_reason == "length", "finish_reason length")

    # streaming: the chunks concatenate to the same text; usage comes last
    chunks, usage = [], None
    for ch in client.completions.create(model=NAME, prompt=prompt, max_tokens=n, temperature=0, stream=True,
                                        stream_options={"include_usage": True}):
        if ch.choices:
            chunks.append(ch.choices[0].text)
        if ch.usage:
            usage = ch.usage
    check("".join(chunks) == text, f"stream {''.join(chunks)!r} == {text!r}")
    check(len(chunks) > 1, "streamed in several chunks")
    check(usage is not None and usage.completion_tokens == n, f"stream usage {usage}")

    # 8 concurrent requests (different prompts, seeded sampling too) each equal to the same request alone
    prompts = [f"{w} of the" for w in ["The door", "A window", "The roof", "One wall", "The floor", "A room",
                                       "The garden", "A chair"]]

    def one(i):
        return client.completions.create(model=NAME, prompt=prompts[i], max_tokens=16, temperature=0.8 if i % 2 else 0,
                                         seed=i).choices[0].text
    alone = [one(i) for i in range(8)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        together = list(ex.map(one, range(8)))
    check(together == alone, f"concurrent == alone: {together} vs {alone}")

    # logprobs of generated tokens
    r = client.completions.create(model=NAME, prompt=prompt, max_tokens=5, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    check(lp is not None and len(lp.token_logprobs) == 5 and all(x <= 0 for x in lp.token_logprobs),
          f"logprobs <= 0: {lp}")
    check(lp is not None and all(len(t) == 2 for t in lp.top_logprobs), "top_logprobs with 2 entries each")

    # echo + logprobs + max_tokens=0: prompt scoring as lm-evaluation-harness asks it
    ctx = "The house stood on the hill"
    r = client.completions.create(model=NAME, prompt=ctx, max_tokens=0, temperature=0, logprobs=1, echo=True)
    lp = r.choices[0].logprobs
    ntok = json.loads(http("POST", base + "/tokenize", {"prompt": ctx})[1])["count"]
    check(r.choices[0].text == ctx, f"echo text {r.choices[0].text!r}")
    check(lp is not None and len(lp.tokens) == ntok and lp.token_logprobs[0] is None and
          all(x is not None and x <= 0 for x in lp.token_logprobs[1:]), f"prompt logprobs for {ntok} tokens: {lp}")
    check(lp is not None and lp.top_logprobs[0] is None and all(isinstance(t, dict) for t in lp.top_logprobs[1:]),
          "prompt top_logprobs")

    # /v1/models, /metrics, /tokenize <-> /detokenize
    check([m.id for m in client.models.list().data] == [NAME], "/v1/models lists the served name")
    st, body = http("GET", base + "/metrics")
    gen = [float(line.split()[-1]) for line in body.splitlines() if line.startswith("vllm:generation_tokens_total{")]
    check(st == 200 and gen and gen[0] > 0, f"vllm:generation_tokens_total > 0: {gen}")
    check(f'model_name="{NAME}"' in body and 'vllm:request_success_total{' in body, "metrics labels")
    ids = json.loads(http("POST", base + "/tokenize", {"prompt": ctx})[1])["tokens"]
    check(json.loads(http("POST", base + "/detokenize", {"tokens": ids})[1])["prompt"] == ctx, "detokenize(tokenize)")

    # bad requests: each answered with OpenAI's error object, and the server keeps serving
    def err(status, method, path, body, headers=auth):
        st, b = http(method, base + path, body, headers)
        try:
            e = json.loads(b)["error"]
            ok = e["code"] == status and isinstance(e["message"], str) and "type" in e
        except Exception:
            ok = False
        check(st == status and ok, f"{path} {body!r:.60} -> {st} {b:.200}")
        return b
    err(400, "POST", "/v1/completions", b"{not json")
    err(400, "POST", "/v1/completions", {"prompt": "x", "temperature": -1})
    err(404, "POST", "/v1/completions", {"model": "nope", "prompt": "x"})
    b = err(400, "POST", "/v1/completions", {"prompt": "house " * 400, "max_tokens": 4})
    check("256" in b, "the too-long message names the context length")
    err(401, "POST", "/v1/completions", {"prompt": "x"}, {"Content-Type": "application/json"})
    err(404, "GET", "/v1/nothing", None)
    err(400, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})  # no template
    # a body over 16 MiB is refused from its Content-Length, before it is sent
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
        sk.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Content-Length: {17 << 20}\r\n\r\n".encode())
        reply = sk.recv(4096).decode(errors="replace")
    check(reply.startswith("HTTP/1.1 413") and '"code": 413' in reply, f"413: {reply[:200]!r}")
    try:
        client.completions.create(model=NAME, prompt="x", max_tokens=1, temperature=-1)
        check(False, "openai client: temperature -1 raises")
    except openai.BadRequestError:
        check(True, "")
    r = client.completions.create(model=NAME, prompt=prompt, max_tokens=n, temperature=0)
    check(r.choices[0].text == text, "still serving the same text after the bad requests")

    # a streaming client that goes away: its request is aborted and the engine frees its blocks
    s = client.completions.create(model=NAME, prompt=prompt, max_tokens=200, temperature=0, stream=True)
    next(iter(s))
    s.close()
    for _ in range(100):
        st, body = http("GET", base + "/metrics")
        if 'finished_reason="abort"} 1' in body:
            break
        time.sleep(0.1)
    check('finished_reason="abort"} 1' in body and 'vllm:num_requests_running{model_name="house"} 0' in body,
          "a disconnected stream is aborted: " + "; ".join(l for l in body.splitlines() if "success" in l or "running{" in l or "generation" in l))
finally:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=20)
            check(rc == 0, f"SIGTERM: exit {rc}")
        except subprocess.TimeoutExpired:
            proc.kill()
            check(False, "SIGTERM: the server did not stop")
    out = proc.stdout.read()
    if __import__("testlib").failures:
        print(out[-3000:])
finish("serve")
