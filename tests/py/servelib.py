"""servelib.py — what the `assay serve` tests share: start the server on a free port with the house model, plain
HTTP calls, and a stop with SIGTERM that checks the exit status."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from testlib import check

BIN = os.environ["ASSAY_BIN"]
MODEL = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")
NAME = "house"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None, timeout=30):
    """(status, body text); JSON-encodes a body that is not bytes."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def start(extra=(), name=NAME):
    """Starts `assay serve` on the house model; returns (process, base URL), or (process, None) when it did not come
    up (the failed check says so)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([BIN, "serve", MODEL, "--port", str(port), "--served-model-name", name,
                             "--max-model-len", "256", "--max-num-seqs", "8", "--threads", "2", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for _ in range(300):
        if proc.poll() is not None:
            break
        try:
            if http("GET", base + "/health")[0] == 200:
                return proc, base
        except OSError:
            pass
        time.sleep(0.1)
    check(False, f"server {' '.join(extra)} answers /health")
    return proc, None


def stop(proc, show_log=False):
    """SIGTERM, then the exit status must be 0; the server's output is printed when show_log, and returned."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=20)
            check(rc == 0, f"SIGTERM: exit {rc}")
        except subprocess.TimeoutExpired:
            proc.kill()
            check(False, "SIGTERM: the server did not stop")
    out = proc.stdout.read()
    if show_log:
        print(out[-3000:])
    return out
