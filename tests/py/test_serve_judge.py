"""test_serve_judge.py — `assay serve --judge-url`: live answers judged in the background by a fake judge. Scripted
scores land in assay:judge_score (buckets 1..5, count and sum), a reply that is not a score counts as invalid, a
judge that stalls past --judge-timeout counts as failed, a full queue drops and counts, the judge sees the prompt
and the answer with the live rubric, and a stalled judge does not slow the requests."""
import json
import statistics
import time

from fakejudge import FakeJudge, metric, parse_metrics
from servelib import http, start, stop
from testlib import check, finish

H = {"Content-Type": "application/json"}
judge = FakeJudge(script=["4", "Score: 5", "3/5", "I cannot tell without more context", "**2**"])
proc, base = start(["--judge-url", judge.url, "--judge-model", "fake-judge", "--judge-sample-rate", "1",
                    "--judge-timeout", "1", "--judge-queue-size", "2", "--chat-template", "chatml"])


def metrics():
    return parse_metrics(http("GET", base + "/metrics")[1])


def wait_for(cond, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def complete(prompt, stream=False):
    t = time.time()
    st, body = http("POST", base + "/v1/completions", {"model": "house", "prompt": prompt, "max_tokens": 8,
                                                        "temperature": 0, "stream": stream}, H)
    check(st == 200, f"completion {prompt!r}: {st} {body[:200]}")
    return time.time() - t


try:
    if base:
        m = metrics()
        check(metric(m, "assay:judge_score_count", name="llm_judge_domain", model_name="house") == 0,
              "judge_score present and empty at start")

        # five answers, judged in order: 4, 5, 3, invalid, 2
        base_lat = [complete("The house")]
        base_lat.append(complete("A small cat"))
        st, body = http("POST", base + "/v1/chat/completions", {"model": "house", "max_tokens": 8, "temperature": 0,
                                                                 "messages": [{"role": "user", "content": "Hello"}]}, H)
        check(st == 200, f"chat completion: {st} {body[:200]}")
        base_lat.append(complete("Once upon a time", stream=True))
        base_lat.append(complete("The river"))
        # prompt-only scoring (echo, max_tokens 0) is not an answer: never judged
        st, _ = http("POST", base + "/v1/completions", {"model": "house", "prompt": "The house", "max_tokens": 0,
                                                         "echo": True, "logprobs": 1}, H)
        check(st == 200, "echo scoring request")
        done = lambda: (lambda m: (metric(m, "assay:judge_judged_total") or 0) + (metric(m, "assay:judge_invalid_total") or 0) >= 5)(metrics())
        check(wait_for(done, 20), "five answers judged within 20 s")
        time.sleep(0.3)
        m = metrics()
        lab = dict(name="llm_judge_domain", model_name="house")
        check(metric(m, "assay:judge_score_count", **lab) == 4, f"count 4: {metric(m, 'assay:judge_score_count', **lab)}")
        check(metric(m, "assay:judge_score_sum", **lab) == 14, f"sum 14: {metric(m, 'assay:judge_score_sum', **lab)}")
        buckets = [metric(m, "assay:judge_score_bucket", le=str(k), **lab) for k in (1, 2, 3, 4, 5)]
        check(buckets == [0, 1, 2, 3, 4], f"cumulative buckets le 1..5: {buckets}")
        check(metric(m, "assay:judge_score_bucket", le="+Inf", **lab) == 4, "bucket +Inf")
        check(metric(m, "assay:judge_invalid_total") == 1, "one invalid reply counted")
        check(metric(m, "assay:judge_failed_total") == 0, "no failed call yet")
        check(metric(m, "assay:judge_dropped_total") == 0, "nothing dropped yet")
        check(judge.n_calls() == 5, f"the judge was called 5 times (echo scoring not judged): {judge.n_calls()}")
        first = judge.calls[0]
        msgs = first["messages"] if first else []
        check(first and first.get("model") == "fake-judge", "the judge model is sent")
        check(len(msgs) == 2 and msgs[0]["role"] == "system" and "1 to 5" in msgs[0]["content"] and
              "no reference answer" in msgs[0]["content"], "the live rubric is the system prompt")
        check(len(msgs) == 2 and "The house" in msgs[1]["content"] and "Answer:" in msgs[1]["content"],
              "the judge sees the prompt and the answer")
        chat_call = judge.calls[2]["messages"][1]["content"] if judge.calls[2] else ""
        check("Hello" in chat_call, "a chat request is judged with its conversation")

        # the judge stalls past the 1 s timeout: calls fail, the queue (2) fills and drops; requests stay fast
        judge.stall = 3.0
        stall_lat = [complete(f"Story number {i}") for i in range(8)]
        med_base, med_stall = statistics.median(base_lat), statistics.median(stall_lat)
        print(f"request latency: median {med_base * 1000:.0f} ms with a working judge, {med_stall * 1000:.0f} ms "
              f"with a stalled one (max {max(stall_lat) * 1000:.0f} ms)")
        check(med_stall < med_base * 2 + 0.1 and max(stall_lat) < 0.9,
              f"latency with a stalled judge {med_stall:.3f} s vs {med_base:.3f} s")
        # every one of the eight either timed out (failed) or found the queue full (dropped): at least the one in
        # flight and the two queued fail; how many more depends on the timing
        fd = lambda m: (metric(m, "assay:judge_failed_total") or 0) + (metric(m, "assay:judge_dropped_total") or 0)
        check(wait_for(lambda: fd(metrics()) == 8, 15), "eight answers failed or dropped")
        m = metrics()
        failed, dropped = metric(m, "assay:judge_failed_total"), metric(m, "assay:judge_dropped_total")
        print(f"stalled judge: {failed:.0f} failed (timeout), {dropped:.0f} dropped (queue full)")
        check(failed >= 3 and dropped >= 1, f"failed {failed} >= 3 and dropped {dropped} >= 1")
        check(metric(m, "assay:judge_score_count", **lab) == 4, "failed calls are not scores")
        check(metric(m, "assay:judge_queue_length") == 0, "the queue drained")
        t = time.time()
        stop(proc)
        check(time.time() - t < 5, f"stops promptly with a stalled judge ({time.time() - t:.1f} s)")
finally:
    if proc.poll() is None:
        stop(proc, show_log=True)
    judge.close()
finish("serve judge")
