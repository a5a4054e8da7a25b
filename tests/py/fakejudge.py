"""fakejudge.py — a stand-in LLM judge for the live-judging tests: an OpenAI-compatible /v1/chat/completions on a
free port that answers from a script (one reply per call, in order; then a default), records what it was asked,
and can be told to stall (sleep before answering) to test the judge's timeouts."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeJudge:
    def __init__(self, script=(), default="4"):
        self.script = list(script)
        self.default = default
        self.stall = 0.0
        self.calls = []  # the request bodies, parsed
        self.lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with judge.lock:
                    try:
                        judge.calls.append(json.loads(body))
                    except ValueError:
                        judge.calls.append(None)
                    reply = judge.script.pop(0) if judge.script else judge.default
                    stall = judge.stall
                if reply == "SLOW" or stall:
                    time.sleep(stall or 5)
                    reply = judge.default
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                out = json.dumps({"id": "judge-1", "object": "chat.completion", "model": "fake-judge",
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                               "finish_reason": "stop"}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the caller gave up (its timeout)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def n_calls(self):
        with self.lock:
            return len(self.calls)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def parse_metrics(text):
    """{(name, frozenset(labels.items())): value} from Prometheus text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, labels = head, {}
        if "{" in head:
            name, rest = head.split("{", 1)
            for part in rest.rstrip("}").split('",'):
                if "=" in part:
                    k, v = part.split("=", 1)
                    labels[k.strip(",")] = v.strip('"')
        out[(name, frozenset(labels.items()))] = float(value)
    return out


def metric(metrics, metric_name, **labels):
    """The value of the one series of `metric_name` whose labels include `labels` (None if none)."""
    for (n, ls), v in metrics.items():
        if n == metric_name and all((k, v2) in ls for k, v2 in labels.items()):
            return v
    return None
