"""test_judge.py — `assay judge` end to end: two `assay serve` processes on the house model (bf16, and `-q fp8`) as
the baseline and the candidate, and a judge written here (http.server answering chat completions with scripted
replies). What it shows:
  - the main run (completions, tests/data/judge_samples.jsonl, --rejudge-identical so that equal answers get the
    scripted judge's different grades): every sample answered by both servers (the
    baseline's answer equals a direct greedy call), every valid reply's score recorded as the judge gave it, a
    reply that is not a score asked again once (then accepted), a judge that never gives a score recorded as
    invalid and counted, a judge that stalls past --timeout counted as a failure after its retry, the Wilcoxon
    p-value equal to scipy.stats.wilcoxon's on the recorded scores, the mean difference and the bootstrap
    interval consistent with the records, the verdict and the exit code agreeing; by default, identical answers
    graded once and the score shared;
  - a candidate that answers 500, 429 or garbage (chat API, baseline through the chat template): retried where it
    may pass, else counted as failed, partial results kept and exit 1 past --max-unscored;
  - a custom --judge-template reaches the judge, and a template without {answer} is refused;
  - bad input: an unreachable endpoint, a judge that accepts connections and never answers, an empty samples
    file: each a clear error within seconds; SIGINT mid-run: exit 130 with the finished samples kept."""
import http.server
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import threading
import time
import zlib

from scipy.stats import wilcoxon

from testlib import check, finish, scratch_dir
from servelib import BIN, NAME, free_port, start, stop
from servelib import http as http_call

SAMPLES = os.path.join(os.environ["ASSAY_SOURCE_DIR"], "tests", "data", "judge_samples.jsonl")
samples = [json.loads(line) for line in open(SAMPLES) if line.strip()]
by_id = {s["id"]: s for s in samples}
tmp = scratch_dir("judge-")
env = dict(os.environ, ASSAY_PROGRESS="0")


# ---- a scripted OpenAI-compatible server: judge replies, and candidate answers for the failure run -------------

def answer_of(content):
    """The answer the default rubric shows the judge."""
    a = content.split("Answer to grade:\n", 1)[1]
    return a.rsplit("\n\nCompare the answer with", 1)[0]


def sample_of(content):
    for s in samples:
        if s["prompt"] in content:
            return s["id"]
    return None


class Fake(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode):
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = mode            # "judge" or "candidate"
        self.lock = threading.Lock()
        self.seen = {}              # (sample, answer) -> times judged
        self.calls = {}             # sample -> candidate calls
        self.contents = []          # what the judge was shown
        self.delay = 0.0
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


def judge_reply(server, content):
    """Scores that differ between two identical answers (the count of times the pair was seen enters), in varied
    formats; scripted invalid and stalled replies for three samples."""
    sid = sample_of(content) or "custom"
    answer = answer_of(content) if "Answer to grade:" in content else content
    with server.lock:
        k = server.seen.get((sid, answer), 0)
        server.seen[(sid, answer)] = k + 1
        server.contents.append(content)
    if sid == "throughput":
        return "stall"
    if sid == "alert":
        return "The answer seems fine to me." if k % 2 == 0 else "Somewhere between good and great."
    if sid == "kv-scales" and k % 2 == 0:
        return "I need more context to grade this."
    score = 1 + (zlib.crc32((sid + answer).encode()) + k) % 5
    fmt = ["{}", "Score: {}", "**{}**", "{}/5", "Rating: {}\nThe answer covers 2 of 3 points."][zlib.crc32(answer.encode()) % 5]
    return fmt.format(score)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, headers=()):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def do_GET(self):
        if self.path == "/v1/models":
            self.send(200, {"object": "list", "data": [{"id": f"fake-{self.server.mode}", "object": "model"}]})
        else:
            self.send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path != "/v1/chat/completions":
            return self.send(404, {"error": {"message": "not found"}})
        content = body["messages"][-1]["content"]
        s = self.server
        if s.delay:
            time.sleep(s.delay)
        if s.mode == "judge":
            text = judge_reply(s, content)
            if text == "stall":
                time.sleep(10)  # past the client's --judge-timeout: the client has gone by then
                return self.send(200, chat(text))
            return self.send(200, chat(text))
        sid = sample_of(content)
        with s.lock:
            n = s.calls[sid] = s.calls.get(sid, 0) + 1
        if sid == "weights-70b":
            return self.send(500, {"error": {"message": "internal error"}})
        if sid == "gpu-util":
            return self.send(200, "<html><body>502 Bad Gateway</body></html>")
        if sid == "kv-fp8" and n == 1:
            return self.send(503, {"error": {"message": "overloaded"}})
        if sid == "small-models" and n == 1:
            return self.send(429, {"error": {"message": "slow down"}}, [("Retry-After", "0")])
        self.send(200, chat(f"A scripted answer about {sid}."))


def chat(text):
    return {"id": "x", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def judge(*args, timeout=120):
    t = time.time()
    p = subprocess.run([BIN, "judge", *args], capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.time() - t


def load(path):
    return json.load(open(path)) if os.path.exists(path) else {}


base_proc, base = start(["--chat-template", "chatml"], name=NAME)
cand_proc, cand = start(["-q", "fp8"], name=NAME + "-fp8")
fake_judge, fake_cand = Fake("judge"), Fake("candidate")
try:
    if base is None or cand is None:
        raise SystemExit

    # ---- the main run --------------------------------------------------------------------------------------
    out = os.path.join(tmp, "main.json")
    p, secs = judge(SAMPLES, "--baseline-url", base, "--candidate-url", cand + "/v1", "--judge-url", fake_judge.url,
                    "--candidate-api", "completions", "--max-tokens", "24", "--judge-timeout", "3", "--max-retries", "1",
                    "--num-concurrent", "4", "--max-unscored", "0.25", "--rejudge-identical", "-o", out)
    print(p.stdout)
    print(f"main run: {secs:.1f} s")
    r = load(out)
    check(p.returncode in (0, 3, 4, 5), f"main run exit {p.returncode}: {p.stderr[-3000:]}")
    check(r.get("verdict", {}).get("exit_code") == p.returncode, "the exit code is the verdict's")
    recs = r.get("samples", [])
    check(len(recs) == 10 and r.get("n_samples") == 10 and not r.get("interrupted"), "10 samples recorded")
    check(r.get("baseline", {}).get("model") == NAME and r.get("candidate", {}).get("model") == NAME + "-fp8" and
          r.get("judge", {}).get("model") == "fake-judge", "model names from /v1/models")
    check(all(x["baseline"]["answer"] is not None and x["candidate"]["answer"] is not None for x in recs),
          "both servers answered every sample")
    # the baseline's answer is the server's greedy completion of the prompt
    st, direct = http_call("POST", base + "/v1/completions", {"model": NAME, "prompt": samples[0]["prompt"], "max_tokens": 24,
                                                         "temperature": 0})
    check(st == 200 and recs and json.loads(direct)["choices"][0]["text"] == recs[0]["baseline"]["answer"],
          "baseline answer == a direct greedy completion")
    rec = {x["id"]: x for x in recs}
    counts = r.get("counts", {})
    for side in ("baseline", "candidate"):
        c = counts.get(side, {})
        check(c.get("answered") == 10 and c.get("answer_failed") == 0, f"{side}: all answered ({c})")
        check(c.get("judge_invalid") == 1 and c.get("judge_failed") == 1 and c.get("scored") == 8,
              f"{side}: 1 invalid, 1 failed, 8 scored ({c})")
        check(c.get("judge_retried") == 2, f"{side}: two samples asked twice ({c})")
        a = rec.get("alert", {}).get(side, {})
        check(a.get("judge_status") == "invalid" and len(a.get("judge_replies", [])) == 2 and a.get("score") is None,
              f"{side}: the unscorable sample is invalid after two replies ({a})")
        k = rec.get("kv-scales", {}).get(side, {})
        check(k.get("judge_status") == "ok" and len(k.get("judge_replies", [])) == 2 and k.get("score") in range(1, 6),
              f"{side}: an invalid first reply, then a score ({k})")
        t = rec.get("throughput", {}).get(side, {})
        check(t.get("judge_status") == "failed" and "no answer within 3 s" in (t.get("judge_error") or ""),
              f"{side}: the stalled judge call is a counted failure ({t.get('judge_error')})")
        for x in recs:
            s = x[side]
            if s["judge_status"] == "ok":
                last = s["judge_replies"][-1]
                want = int(next(ch for ch in last if ch.isdigit()))
                check(s["score"] == want, f"{x['id']} {side}: score {s['score']} is the reply's {last!r}")
    check(counts.get("pairs") == 8, f"8 scored pairs ({counts.get('pairs')})")
    check(secs < 90, f"the run is bounded ({secs:.1f} s)")

    # statistics from the records
    pairs = [(x["baseline"]["score"], x["candidate"]["score"]) for x in recs
             if x["baseline"]["score"] is not None and x["candidate"]["score"] is not None]
    b = [a for a, _ in pairs]
    c = [z for _, z in pairs]
    sc = r.get("scores", {})
    w = sc.get("wilcoxon", {})
    ref = wilcoxon(c, b)
    check(abs(w.get("p_value", -1) - float(ref.pvalue)) <= 1e-12 * max(1, float(ref.pvalue)),
          f"Wilcoxon p {w.get('p_value')} == scipy {float(ref.pvalue)} on {pairs}")
    check(w.get("statistic") == float(ref.statistic), f"Wilcoxon W {w.get('statistic')} == scipy {float(ref.statistic)}")
    check(any(x != y for x, y in pairs), "some pairs differ (the test means something)")
    diff = statistics.mean(c) - statistics.mean(b)
    check(abs(sc.get("mean_difference", 99) - diff) < 1e-12 and abs(sc.get("baseline_mean_paired", 99) - statistics.mean(b)) < 1e-12,
          "mean difference from the records")
    d = [y - x for x, y in pairs]
    check(min(d) <= sc.get("mean_difference_lo", 99) <= diff <= sc.get("mean_difference_hi", -99) <= max(d),
          f"bootstrap interval [{sc.get('mean_difference_lo')}, {sc.get('mean_difference_hi')}] around {diff}")
    v = r.get("verdict", {})
    check(v.get("name") == "inconclusive" and v.get("samples_needed", 0) > 8 or v.get("name") != "inconclusive",
          f"an inconclusive verdict says how many pairs would settle it ({v})")
    check(f"Verdict: {v.get('name')}" in p.stdout, "the summary prints the verdict")
    # identical answers are graded once by default, the score shared (--limit 5: the first five samples)
    out2 = os.path.join(tmp, "shared.json")
    fake_judge.seen.clear()
    fake_judge.contents.clear()
    p2, _ = judge(SAMPLES, "--baseline-url", base, "--candidate-url", cand, "--judge-url", fake_judge.url,
                  "--candidate-api", "completions", "--max-tokens", "24", "--judge-timeout", "3", "--max-retries", "0",
                  "--num-concurrent", "1", "--limit", "5", "-o", out2)
    r2 = load(out2)
    x2 = r2.get("samples", [])
    same = [x for x in x2 if x["baseline"]["answer"] == x["candidate"]["answer"]]
    check(p2.returncode in (0, 1, 3, 4, 5) and len(x2) == 5 and r2.get("n_samples_in_file") == 10 and
          r2.get("counts", {}).get("identical_answers") == len(same), f"--limit 5: exit {p2.returncode} {p2.stderr[-500:]}")
    check(all(x["candidate"]["judge_shared"] and x["candidate"]["score"] == x["baseline"]["score"] and
              x["candidate"]["judge_replies"] == x["baseline"]["judge_replies"] for x in same) and
          not any(x["candidate"]["judge_shared"] for x in x2 if x not in same), "identical answers share one grade")
    calls = sum(len(x["baseline"]["judge_replies"]) + (0 if x["candidate"]["judge_shared"] else len(x["candidate"]["judge_replies"]))
                for x in x2)
    check(len(fake_judge.contents) == calls, f"the judge was asked {len(fake_judge.contents)} times, {calls} replies recorded")
    print(f"identical answers in the first five samples: {len(same)}")

    # ---- a candidate that fails: 500, garbage, a 503 and a 429 that pass on retry; the chat API ------------
    out = os.path.join(tmp, "fail.json")
    fake_judge.seen.clear()
    p, secs = judge(SAMPLES, "--baseline-url", base, "--candidate-url", fake_cand.url, "--judge-url", fake_judge.url,
                    "--max-tokens", "16", "--judge-timeout", "3", "--max-retries", "2", "-o", out)
    r = load(out)
    rec = {x["id"]: x for x in r.get("samples", [])}
    c = r.get("counts", {}).get("candidate", {})
    check(p.returncode == 1 and "have no pair of scores" in p.stderr and "partial results" in p.stderr,
          f"failures past --max-unscored: exit 1 ({p.returncode}, {p.stderr[-400:]})")
    check(c.get("answered") == 8 and c.get("answer_failed") == 2, f"two candidate answers failed ({c})")
    e500 = rec.get("weights-70b", {}).get("candidate", {})
    check("HTTP 500" in (e500.get("answer_error") or "") and e500.get("answer_attempts") == 3,
          f"a 500 is retried, then recorded ({e500})")
    eg = rec.get("gpu-util", {}).get("candidate", {})
    check("not JSON" in (eg.get("answer_error") or ""), f"a garbage body is recorded ({eg.get('answer_error')})")
    for sid in ("kv-fp8", "small-models"):
        x = rec.get(sid, {}).get("candidate", {})
        check(x.get("answer") == f"A scripted answer about {sid}." and x.get("answer_attempts") == 2,
              f"{sid}: a 503/429 passes on the retry ({x})")
    bb = rec.get("weights-70b", {}).get("baseline", {})
    check(bb.get("answer") is not None and bb.get("judge_status") == "ok", "the baseline's side of a failed sample is kept")
    check(r.get("baseline", {}).get("api") == "chat" and rec.get("kv-fp8", {}).get("baseline", {}).get("answer") is not None,
          "the chat API through the server's chat template")
    check(secs < 60, f"bounded ({secs:.1f} s)")

    # ---- a custom template; a template without the answer ------------------------------------------------
    tpl = os.path.join(tmp, "rubric.txt")
    open(tpl, "w").write("Grade this reply: {response}\nQuestion: {question}\nReference: {reference}\nNumber only.\n")
    fake_judge.contents.clear()
    p, _ = judge(SAMPLES, "--baseline-url", base, "--candidate-url", cand, "--judge-url", fake_judge.url,
                 "--candidate-api", "completions", "--max-tokens", "8", "--limit", "2", "--judge-template", tpl,
                 "-o", os.path.join(tmp, "tpl.json"))
    shown = list(fake_judge.contents)
    check(2 <= len(shown) <= 4 and all(x.startswith("Grade this reply: ") for x in shown) and
          any(f"Question: {samples[0]['prompt']}\nReference: {samples[0]['expected']}\n" in x for x in shown),
          f"the custom template reaches the judge ({shown[:1]})")
    open(tpl, "w").write("Grade {prompt} against {expected}.\n")
    p, _ = judge(SAMPLES, "--baseline-url", base, "--candidate-url", cand, "--judge-url", fake_judge.url,
                 "--judge-template", tpl)
    check(p.returncode == 1 and "no {answer} placeholder" in p.stderr, f"a template without the answer: {p.stderr}")

    # ---- bad input ---------------------------------------------------------------------------------------
    dead = f"http://127.0.0.1:{free_port()}"
    p, secs = judge(SAMPLES, "--baseline-url", dead, "--candidate-url", cand, "--judge-url", fake_judge.url,
                    "--timeout", "5", "-o", os.path.join(tmp, "dead.json"))
    check(p.returncode == 1 and "cannot reach the baseline endpoint" in p.stderr and secs < 15,
          f"unreachable baseline: exit {p.returncode} in {secs:.1f} s: {p.stderr.strip()}")

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # accepts connections (the kernel does), never answers
    p, secs = judge(SAMPLES, "--baseline-url", base, "--candidate-url", cand, "--judge-url",
                    f"http://127.0.0.1:{silent.getsockname()[1]}", "--judge-timeout", "2", "--max-retries", "1",
                    "-o", os.path.join(tmp, "silent.json"))
    silent.close()
    check(p.returncode == 1 and "cannot reach the judge endpoint" in p.stderr and "no answer within 2 s" in p.stderr
          and secs < 15, f"a judge that never answers: exit {p.returncode} in {secs:.1f} s: {p.stderr.strip()}")

    empty = os.path.join(tmp, "empty.jsonl")
    open(empty, "w").write("\n\n")
    p, secs = judge(empty, "--baseline-url", base, "--candidate-url", cand, "--judge-url", fake_judge.url)
    check(p.returncode == 1 and "no samples" in p.stderr and secs < 5, f"empty samples file: {p.stderr.strip()}")
    p, _ = judge(os.path.join(tmp, "missing.jsonl"), "--baseline-url", base, "--candidate-url", cand, "--judge-url", fake_judge.url)
    check(p.returncode == 1 and "missing.jsonl" in p.stderr, f"missing samples file: {p.stderr.strip()}")
    p, _ = judge(SAMPLES, "--baseline-url", base, "--judge-url", fake_judge.url)
    check(p.returncode == 2 and "--candidate-url is required" in p.stderr, f"usage: {p.stderr.strip()}")

    # ---- SIGINT mid-run: the finished samples are kept (the progress lines say when two are done) ------------
    fake_judge.delay = 0.3
    fake_judge.seen.clear()
    out = os.path.join(tmp, "sigint.json")
    proc = subprocess.Popen([BIN, "judge", SAMPLES, "--baseline-url", base, "--candidate-url", cand, "--judge-url",
                             fake_judge.url, "--candidate-api", "completions", "--max-tokens", "8", "--num-concurrent", "1",
                             "-o", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(env, ASSAY_PROGRESS="1"))
    progress, deadline = [], time.time() + 90
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    while time.time() < deadline and not any("2/10 sample" in line for line in progress):
        if sel.select(timeout=1):
            line = proc.stderr.readline()
            if not line:
                break
            progress.append(line)
    proc.send_signal(signal.SIGINT)
    try:
        so, se = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        so, se = proc.communicate()
    fake_judge.delay = 0
    r = load(out)
    st = [x["status"] for x in r.get("samples", [])]
    check(any("judge:  10% 1/10 sample" in line for line in progress), f"progress lines: {progress[-3:]}")
    check(proc.returncode == 130 and r.get("interrupted") is True and "assay judge: interrupted by SIGINT; partial results" in se,
          f"SIGINT: exit {proc.returncode}, interrupted {r.get('interrupted')}: {se[-300:]}")
    check(st.count("done") >= 2 and st.count("not run") >= 1 and len(st) == 10, f"partial results kept: {st}")
    check(r.get("counts", {}).get("not_run") == st.count("not run"), "not-run samples counted")
finally:
    stop(base_proc)
    stop(cand_proc)
    fake_judge.shutdown()
    fake_cand.shutdown()
finish("judge")
