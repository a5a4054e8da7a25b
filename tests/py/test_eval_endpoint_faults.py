"""test_eval_endpoint_faults.py — `assay eval --base-url` against servers that misbehave, each a clear error or a
counted failure with the results so far kept, never a hang. The server here is a small fake of the OpenAI
completions API (byte tokens, log-probabilities computed from the token ids, canned generations) that can answer
500/429/503 now and then, send garbage, hang, or refuse a missing API key:
  - flaky (every third completions request answers 500, 503 or 429 with Retry-After): the retries make the results
    equal to a clean run's, and stderr counts the retries;
  - garbage for one document's request: that document is counted as failed and left out, the others equal the
    clean run, the results file is written, the exit status is 1;
  - always 500 / a server that never answers (--timeout 1): the run stops after --max-failures documents in a row,
    within seconds, with the error and the partial results in the file;
  - nothing listening on the port; garbage from /v1/models; a wrong API key (401, not retried): a clear error.
No model is needed: only the task data."""
import http.server
import json
import os
import socket
import subprocess
import threading
import time

from testlib import check, finish, scratch_dir

BIN = os.environ["ASSAY_BIN"]
tmp = scratch_dir("assay-faults-")
KEY = "sk-fault-test"


def lp_of(prev, tok):
    return -(((tok * 7 + prev * 3) % 23) / 10.0) - 0.05


class Fake(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "clean"
    lock = threading.Lock()
    completions = 0

    def log_message(self, *a):
        pass

    def send(self, status, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if self.mode != "key" or self.headers.get("Authorization") == f"Bearer {KEY}":
            return True
        self.send(401, {"error": {"message": "Invalid API key", "type": "invalid_request_error"}})
        return False

    def do_GET(self):
        if self.mode == "garbage_models":
            return self.send(200, b"<html>this is not an API</html>")
        if not self.authorized():
            return
        if self.path == "/v1/models":
            return self.send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        self.send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(n) or b"{}")
        if not self.authorized():
            return
        if self.path == "/tokenize":
            ids = list(req["prompt"].encode())
            return self.send(200, {"count": len(ids), "max_model_len": 4096, "tokens": ids})
        if self.path != "/v1/completions":
            return self.send(404, {"error": {"message": "not found"}})
        with Fake.lock:
            Fake.completions += 1
            k = Fake.completions
        if self.mode == "always500":
            return self.send(500, {"error": {"message": "internal error"}})
        if self.mode == "hang":
            time.sleep(30)
            return
        if self.mode == "flaky" and k % 3 == 0:
            status = (500, 503, 429)[(k // 3) % 3]
            return self.send(status, {"error": {"message": "try again"}}, [("Retry-After", "0.2")] if status == 429 else [])
        if self.mode == "garbage_one" and k == 5:  # piqa: two choices per document, so the third document
            return self.send(200, b"{\"choices\": [{\"text\": \"unterminated")
        p = req["prompt"]
        ids = p if isinstance(p, list) else list(p.encode())
        if req.get("max_tokens") == 0 and req.get("echo"):
            lps = [None] + [lp_of(ids[i - 1], ids[i]) for i in range(1, len(ids))]
            toks = [chr(t) for t in ids]
            tops = [None] + [{toks[i]: lps[i], "<alt>": lps[i] + (0.5 if ids[i] % 4 == 0 else -0.5)} for i in range(1, len(ids))]
            text = bytes(ids).decode("utf-8", "replace")
            return self.send(200, {"choices": [{"index": 0, "text": text, "logprobs": {
                "tokens": toks, "token_logprobs": lps, "top_logprobs": tops, "text_offset": list(range(len(ids)))},
                "finish_reason": "length"}], "usage": {"prompt_tokens": len(ids), "completion_tokens": 0}})
        out = f" So the answer is {sum(ids) % 97}.\n\nQuestion: what else"
        return self.send(200, {"choices": [{"index": 0, "text": out, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": len(ids), "completion_tokens": 12}})


def serve(mode):
    cls = type("F", (Fake,), {"mode": mode})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), cls)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def run(url, out, *extra, tasks="piqa,gsm8k", limit="8"):
    Fake.completions = 0
    t0 = time.time()
    p = subprocess.run([BIN, "eval", "--base-url", url, "--tasks", tasks, "--limit", limit, "-o", out, "--quiet", "--force",
                        *extra], capture_output=True, text=True, timeout=120)
    return p, time.time() - t0


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


# a clean run is the reference
srv, url = serve("clean")
clean_p, _ = run(url, os.path.join(tmp, "clean.json"))
srv.shutdown()
clean = load(os.path.join(tmp, "clean.json"))
check(clean_p.returncode == 0 and clean is not None, f"clean run: exit {clean_p.returncode}: {clean_p.stderr[-500:]}")
check(clean is not None and len(clean["samples"]["piqa"]) == 8 and len(clean["samples"]["gsm8k"]) == 8,
      "clean run: 8 records per task")
check(clean is not None and clean["samples"]["gsm8k"][0]["resps"][0][0].endswith(".\n\n"),
      "generation is cut at the stop sequence 'Question:'")

# flaky: retried until answered, the same results
srv, url = serve("flaky")
p, secs = run(url, os.path.join(tmp, "flaky.json"), "--max-retries", "3")
srv.shutdown()
flaky = load(os.path.join(tmp, "flaky.json"))
check(p.returncode == 0 and flaky is not None, f"flaky: exit {p.returncode}: {p.stderr[-500:]}")
if flaky and clean:
    check(flaky["samples"] == clean["samples"] and flaky["results"] == clean["results"], "flaky: results equal the clean run's")
retries = [l for l in p.stderr.splitlines() if "of them retries" in l]
check(retries and int(retries[0].split(" of them retries")[0].split(", ")[-1]) >= 4, f"flaky: retries counted: {retries}")

# garbage for one document: counted, left out, the rest kept
srv, url = serve("garbage_one")
p, secs = run(url, os.path.join(tmp, "garbage.json"), tasks="piqa")
srv.shutdown()
g = load(os.path.join(tmp, "garbage.json"))
check(p.returncode == 1, f"garbage for one document: exit {p.returncode}")
check("not JSON" in p.stderr and "1 document(s) left out" in p.stderr, f"garbage: stderr says so: {p.stderr[-600:]}")
if g and clean:
    ids = [s["doc_id"] for s in g["samples"]["piqa"]]
    check(ids == [0, 1, 3, 4, 5, 6, 7], f"garbage: document 2 left out: {ids}")
    check(all(s in clean["samples"]["piqa"] for s in g["samples"]["piqa"]), "garbage: the other records equal the clean run's")
    t = g["assay"]["timings"]["piqa"]
    check(t.get("failed") == 1 and "not JSON" in t.get("first_error", ""), f"garbage: counted in the file: {t}")
    check(g["n-samples"]["piqa"]["effective"] == 7, "garbage: n-samples effective 7")
else:
    check(False, "garbage: the results file was written")

# always 500: stops after --max-failures in a row, quickly, results file written with the error
srv, url = serve("always500")
p, secs = run(url, os.path.join(tmp, "500.json"), "--max-retries", "1", "--max-failures", "3")
srv.shutdown()
r = load(os.path.join(tmp, "500.json"))
check(p.returncode == 1 and "3 documents in a row failed" in p.stderr and "HTTP 500" in p.stderr,
      f"always 500: exit {p.returncode}: {p.stderr[-600:]}")
check(secs < 30, f"always 500: stopped in {secs:.1f} s")
check(r is not None and "3 documents in a row failed" in r["assay"].get("error", ""), "always 500: the error is in the file")

# a server that never answers: every request times out (--timeout 1), the run stops, no hang
srv, url = serve("hang")
p, secs = run(url, os.path.join(tmp, "hang.json"), "--timeout", "1", "--max-retries", "1", "--max-failures", "2",
              "--num-concurrent", "2")
srv.shutdown()
check(p.returncode == 1 and "Timeout was reached" in p.stderr, f"hang: exit {p.returncode}: {p.stderr[-600:]}")
check(secs < 30, f"hang: stopped in {secs:.1f} s")

# nothing listening
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
p, secs = run(dead, os.path.join(tmp, "dead.json"), "--max-retries", "1")
check(p.returncode == 1 and "Couldn't connect to server" in p.stderr and dead in p.stderr,
      f"unreachable: exit {p.returncode}: {p.stderr[-400:]}")
check(secs < 15, f"unreachable: failed in {secs:.1f} s")
check(not os.path.exists(os.path.join(tmp, "dead.json")), "unreachable: no results file")

# garbage from /v1/models: a clear error at the start
srv, url = serve("garbage_models")
p, secs = run(url, os.path.join(tmp, "gm.json"))
srv.shutdown()
check(p.returncode == 1 and "/v1/models: the answer is not JSON" in p.stderr, f"garbage /v1/models: {p.stderr[-400:]}")

# an API key: refused without it (401 is not retried), accepted with it
srv, url = serve("key")
p, secs = run(url, os.path.join(tmp, "nokey.json"), "--max-retries", "3")
check(p.returncode == 1 and "HTTP 401" in p.stderr and "Invalid API key" in p.stderr and secs < 10,
      f"no API key: exit {p.returncode} in {secs:.1f} s: {p.stderr[-400:]}")
p, secs = run(url, os.path.join(tmp, "key.json"), "--api-key", KEY)
srv.shutdown()
k = load(os.path.join(tmp, "key.json"))
check(p.returncode == 0 and k is not None and clean is not None and k["samples"] == clean["samples"],
      f"with the API key: exit {p.returncode}: {p.stderr[-300:]}")

# usage errors
p = subprocess.run([BIN, "eval", "/some/model", "--base-url", url, "--tasks", "piqa"], capture_output=True, text=True)
check(p.returncode == 2 and "give no MODEL" in p.stderr, f"MODEL with --base-url: exit {p.returncode}: {p.stderr}")
p = subprocess.run([BIN, "eval", "--base-url", url, "--tasks", "piqa", "--num-concurrent", "0"], capture_output=True, text=True)
check(p.returncode == 2, f"--num-concurrent 0: exit {p.returncode}")
finish("eval against misbehaving servers")
