"""test_dashboard_prometheus_heavy.py — `assay dashboard` against a real Prometheus (Debian's prometheus) scraping
`assay serve` every second, with a fake judge. Load runs on the default configuration, then the server restarts on
the same port with `-q fp8` (so assay:engine_config_info changes) and the judge starts giving lower scores; the
page must hold both series with points and the configuration mark, and Chromium renders it headless (the screenshot
is kept in the test's output directory, and its pixels must show the three colours). Also: a Prometheus that is
down is a clear error, fast."""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
import struct

from fakejudge import FakeJudge
from servelib import BIN, MODEL, free_port, http
from testlib import check, finish

OUT = os.path.join(os.environ.get("ASSAY_BUILD_DIR", "build"), "test-output", "dashboard")
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
PROMETHEUS = shutil.which("prometheus")


def start_server(port, judge_url, extra=()):
    log = open(os.path.join(OUT, "serve.log"), "a")
    proc = subprocess.Popen([BIN, "serve", MODEL, "--port", str(port), "--served-model-name", "house",
                             "--max-model-len", "256", "--max-num-seqs", "8", "--threads", "2",
                             "--judge-url", judge_url, "--judge-sample-rate", "1", "--judge-timeout", "2", *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            if http("GET", f"http://127.0.0.1:{port}/health", timeout=2)[0] == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    check(False, f"assay serve {' '.join(extra)} came up on port {port}")
    return proc


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        check(proc.wait(timeout=20) == 0, "the server stopped cleanly")
    except subprocess.TimeoutExpired:
        proc.kill()
        check(False, "the server did not stop on SIGTERM")


def load(port, seconds):
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        st, _ = http("POST", f"http://127.0.0.1:{port}/v1/completions",
                     {"model": "house", "prompt": f"Story {n}:", "max_tokens": 16, "temperature": 0.8, "seed": n},
                     {"Content-Type": "application/json"})
        n += st == 200
    return n


def png_rgb(path):
    """Pixel rows (bytes, RGB or RGBA) of an 8-bit truecolour PNG, and the bytes per pixel."""
    data = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", data[pos + 8:pos + 18])
        elif kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6)
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytes(stride)
    for y in range(h):
        f, cur = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = cur[x - bpp] if x >= bpp else 0
            up, ul = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                cur[x] = (cur[x] + left) & 255
            elif f == 2:
                cur[x] = (cur[x] + up) & 255
            elif f == 3:
                cur[x] = (cur[x] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                cur[x] = (cur[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append(bytes(cur))
        prev = cur
    return rows, bpp


def main():
    if not PROMETHEUS:
        print("SKIP: prometheus is not installed (scripts/setup-tests.sh installs Debian's prometheus)")
        check(True, "skipped")
        return
    # a Prometheus that is down: a clear error, quickly
    dead = free_port()
    t = time.time()
    p = subprocess.run([BIN, "dashboard", "--prometheus", f"http://127.0.0.1:{dead}", "--timeout", "3", "-o",
                        os.path.join(OUT, "none.html")], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "cannot query Prometheus" in p.stderr and time.time() - t < 10,
          f"Prometheus down: exit {p.returncode}, {p.stderr.strip()!r}")
    check(not os.path.exists(os.path.join(OUT, "none.html")), "no page written when Prometheus is down")

    judge = FakeJudge(default="4")
    port, pport = free_port(), free_port()
    cfg = os.path.join(OUT, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                f"  - job_name: assay\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    prom_url = f"http://127.0.0.1:{pport}"
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(OUT, 'tsdb')}",
                             f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
                            stdout=open(os.path.join(OUT, "prometheus.log"), "w"), stderr=subprocess.STDOUT)
    server = None
    try:
        for _ in range(200):
            try:
                if http("GET", prom_url + "/-/ready", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if not check(http("GET", prom_url + "/-/ready")[0] == 200, "prometheus is ready"):
            return
        t0 = time.time()
        server = start_server(port, judge.url)
        n1 = load(port, 20)
        stop_server(server)
        judge.default = "3"  # quality drops with the new configuration
        t_switch = time.time()
        server = start_server(port, judge.url, ["-q", "fp8"])
        n2 = load(port, 20)
        time.sleep(4)  # a few more scrapes
        print(f"load: {n1} requests before the switch, {n2} after; judge called {judge.n_calls()} times")
        page = os.path.join(OUT, "dashboard.html")
        rng = int(time.time() - t0 + 10)
        p = subprocess.run([BIN, "dashboard", "--prometheus", prom_url, "--range", f"{rng}s", "--step", "1s",
                            "--rate-window", "10s", "-o", page], capture_output=True, text=True, timeout=60)
        print(p.stderr.strip())
        if not check(p.returncode == 0 and os.path.exists(page), f"assay dashboard: exit {p.returncode}: {p.stderr}"):
            return
        html = open(page, encoding="utf-8").read()
        pts = {m.group(1): int(m.group(2)) for m in re.finditer(r'data-series="(\w+)" data-points="(\d+)"', html)}
        check(pts.get("throughput", 0) >= 20, f"throughput series has points: {pts}")
        check(pts.get("judge_score", 0) >= 20, f"judge score series has points: {pts}")
        marks = re.findall(r'class="mark config-change" data-time="([\d.]+)" data-change="([^"]*)"', html)
        check(len(marks) == 1 and "quantization" in marks[0][1] and "fp8" in marks[0][1],
              f"one configuration mark, quantization -> fp8: {marks}")
        if marks:
            check(abs(float(marks[0][0]) - t_switch) < 15, f"the mark is at the switch ({float(marks[0][0]) - t_switch:+.1f} s)")
        scores = re.findall(r'<tr class="stretch">(?:<td>[^<]*</td>){4}<td>([^<]*)</td><td>([^<]*)</td></tr>', html)
        check(len(scores) == 2, f"two configuration stretches in the table: {scores}")
        if len(scores) == 2:
            check(scores[0][1] != "-" and scores[1][1] != "-" and float(scores[0][1]) > float(scores[1][1]),
                  f"the table shows the score drop: {scores}")
        check("<script" not in html and not re.search(r'(src|href)="https?:', html) and "@import" not in html,
              "the page is self-contained (no script, no external resource)")

        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if not chromium:
            print("SKIP rendering: chromium is not installed (scripts/setup-tests.sh installs Debian's chromium)")
            return
        png = os.path.join(OUT, "dashboard.png")
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--window-size=1100,760", f"--user-data-dir={os.path.join(OUT, 'chromium-profile')}",
                            f"--screenshot={png}", "file://" + os.path.abspath(page)],
                           capture_output=True, text=True, timeout=120)
        if not check(r.returncode == 0 and os.path.exists(png), f"chromium rendered the page (exit {r.returncode})"):
            return
        print(f"screenshot: {png}")
        rows, bpp = png_rgb(png)
        want = {"throughput": (0x1f, 0x77, 0xb4), "judge score": (0xd6, 0x27, 0x28), "configuration mark": (0x2c, 0xa0, 0x2c)}
        count = dict.fromkeys(want, 0)
        for row in rows:
            for x in range(0, len(row), bpp):
                px = tuple(row[x:x + 3])
                for k, c in want.items():
                    if px == c:
                        count[k] += 1
        check(all(v > 30 for v in count.values()), f"the screenshot shows every series and the mark: {count}")
    finally:
        if server and server.poll() is None:
            stop_server(server)
        prom.send_signal(signal.SIGTERM)
        try:
            prom.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prom.kill()
        judge.close()


main()
finish("dashboard with prometheus")
