"""test_report_html.py — `assay compare --html/--markdown` end to end, and the HTML rendered by headless Chromium.

Two results files are made here with per-sample records (hellaswag-like accuracies and wikitext-like documents),
the candidate a little worse; the expected verdict and exit code are computed here from the files and the
thresholds. Then Debian's chromium renders report.html headless: the page must log no console errors (a control
page that does log one proves the check can fail), and the screenshot must show the charts: the threshold
bands' colours and enough distinct colours to be more than blank text.
Exit code 0 = all checks passed.
"""
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
import testlib  # noqa: E402
from testlib import check  # noqa: E402

BIN = os.environ["ASSAY_BIN"]




def results_file(path, acc, acc_norm, docs):
    n = len(acc)
    ll = sum(d[0] for d in docs)
    words = sum(d[1] for d in docs)
    nbytes = sum(d[2] for d in docs)
    res = {
        "results": {
            "hellaswag": {"alias": "hellaswag", "acc,none": sum(acc) / n, "acc_stderr,none": 0.01,
                          "acc_norm,none": sum(acc_norm) / n, "acc_norm_stderr,none": 0.01},
            "wikitext": {"alias": "wikitext", "word_perplexity,none": math.exp(-ll / words),
                         "word_perplexity_stderr,none": "N/A", "bits_per_byte,none": -ll / nbytes / math.log(2),
                         "bits_per_byte_stderr,none": "N/A"},
        },
        "higher_is_better": {"hellaswag": {"acc": True, "acc_norm": True},
                             "wikitext": {"word_perplexity": False, "bits_per_byte": False}},
        "model_name": os.path.basename(path),
        "config": {"model_args": "pretrained=house"},
        "assay": {"timings": {"hellaswag": {"tokens_per_second": 1000.0 if "base" in path else 1450.0},
                              "wikitext": {"tokens_per_second": 1100.0 if "base" in path else 1500.0}}},
        "samples": {
            "hellaswag": [{"doc_id": i, "acc,none": acc[i], "acc_norm,none": acc_norm[i]} for i in range(n)],
            "wikitext": [{"doc_id": i, "loglikelihood": d[0], "words": d[1], "bytes": d[2], "tokens": d[1]} for i, d in
                         enumerate(docs)],
        },
    }
    json.dump(res, open(path, "w"))
    return res


def png_pixels(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def render(html, outdir, name):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    png = os.path.join(outdir, name + ".png")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,1500",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={os.path.join(outdir, 'profile-' + name)}",
           f"--screenshot={png}", "file://" + html]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [l for l in p.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    return p.returncode, png, console


def main():
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        print("FAIL: chromium is not installed (scripts/setup-tests.sh installs Debian's chromium)")
        return 1
    rnd = random.Random(7)
    n = 800
    base_acc = [1.0 if rnd.random() < 0.45 else 0.0 for _ in range(n)]
    base_norm = [1.0 if rnd.random() < 0.55 else 0.0 for _ in range(n)]
    cand_acc = list(base_acc)
    cand_norm = list(base_norm)
    for i in range(0, 40, 4):  # 10 right answers lost in acc_norm, 3 in acc
        if cand_norm[i] == 1.0:
            cand_norm[i] = 0.0
    for i in range(0, 9, 3):
        if cand_acc[i] == 1.0:
            cand_acc[i] = 0.0
    base_docs, cand_docs = [], []
    for _ in range(62):
        words = rnd.randint(200, 4000)
        ll = -words * rnd.uniform(3.0, 4.0)
        base_docs.append((ll, words, words * 6))
        cand_docs.append((ll - 0.004 * words, words, words * 6))
    with tempfile.TemporaryDirectory() as d:
        bp, cp = os.path.join(d, "base.json"), os.path.join(d, "cand.json")
        b = results_file(bp, base_acc, base_norm, base_docs)
        c = results_file(cp, cand_acc, cand_norm, cand_docs)
        # expected verdict from the gating metrics' intervals (hellaswag acc_norm: the paired normal interval computed
        # here; wikitext word_perplexity: every document shifts by the same per-word amount, so every bootstrap
        # resample has the same ratio and the interval is the point)
        z = 1.959963984540054
        # 0/1 outcomes: Agresti and Min's interval, half a document added to each cell of the paired 2x2 table
        lost = sum(1 for x, y in zip(base_norm, cand_norm) if x == 1 and y == 0) + 0.5
        won = sum(1 for x, y in zip(base_norm, cand_norm) if x == 0 and y == 1) + 0.5
        nn, mb = n + 2, sum(base_norm) / n
        md_ = (won - lost) / nn
        half = z * math.sqrt(((lost + won) - (won - lost) ** 2 / nn) / nn ** 2)
        ppl = 100 * (c["results"]["wikitext"]["word_perplexity,none"] / b["results"]["wikitext"]["word_perplexity,none"] - 1)
        intervals = [(-100 * (md_ + half) / mb, -100 * (md_ - half) / mb), (ppl, ppl)]

        def verdict(lo, hi):
            return 0 if hi < 0.5 else 3 if lo > 1.5 else 1 if lo >= 0.5 and hi <= 1.5 else 2  # severity order

        sev = max(verdict(lo, hi) for lo, hi in intervals)
        want = {0: 0, 1: 3, 2: 5, 3: 4}[sev]
        worst = intervals
        html, md = os.path.join(d, "report.html"), os.path.join(d, "report.md")
        p = subprocess.run([BIN, "compare", bp, cp, "--html", html, "--markdown", md], capture_output=True, text=True)
        check(p.returncode == want, f"compare exit {p.returncode}, expected {want} (degradation intervals {worst})\n{p.stdout}{p.stderr}")
        check("hellaswag" in p.stdout and "word_perplexity,none" in p.stdout, "table lists the metrics")
        text = open(md, encoding="utf-8").read()
        check("Verdict:" in text and "| hellaswag | `acc_norm,none`" in text, "report.md has the verdict and the table")
        page = open(html, encoding="utf-8").read()
        check("<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", ""),
              "report.html is self-contained (no scripts, no external resources)")
        check(page.count("<svg") == 2, "report.html has two charts")
        # identical files: no difference; 800 documents rule out a 0.5% loss of accuracy only up to Agresti-Min's
        # +-z / (n + 2) = 0.24 points (0.4% of hellaswag's 0.55 acc_norm), and the perplexity interval is zero: ship
        p = subprocess.run([BIN, "compare", bp, bp], capture_output=True, text=True)
        check(p.returncode == 0 and "Verdict: ship" in p.stdout, f"identical files: exit {p.returncode}\n{p.stdout}")

        rc, png, console = render(html, d, "report")
        check(rc == 0 and os.path.exists(png), f"chromium rendered the report (exit {rc})")
        check(not console, f"console messages while rendering: {console}")
        if os.path.exists(png):
            w, h, bpp, rows = png_pixels(png)
            colours = set()
            green = yellow = red = 0
            for row in rows[::2]:
                for x in range(0, w * bpp, bpp * 2):
                    px = tuple(row[x:x + 3])
                    colours.add(px)
                    green += px == (0xda, 0xfb, 0xe1)
                    yellow += px == (0xff, 0xf8, 0xc5)
                    red += px == (0xff, 0xeb, 0xe9)
            check(green > 500 and yellow > 200 and red > 200,
                  f"threshold bands visible in the screenshot (green {green}, yellow {yellow}, red {red} samples)")
            check(len(colours) > 50, f"{len(colours)} distinct colours: charts and text drawn")
        # control: a page that logs an error must be caught by the same check
        bad = os.path.join(d, "bad.html")
        open(bad, "w").write("<!DOCTYPE html><html><body><script>console.error('deliberate error')</script></body></html>")
        rc, _, console = render(bad, d, "bad")
        check(any("deliberate error" in l for l in console), f"the console check sees a deliberate error: {console}")
    print(f"{testlib.checks - testlib.failures} passed, {testlib.failures} failed")
    return 1 if testlib.failures or not testlib.checks else 0


sys.exit(main())
