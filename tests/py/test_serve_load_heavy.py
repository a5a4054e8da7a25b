"""test_serve_load_heavy.py — `assay serve` under load, on the house model: 64 concurrent streaming requests (the openai
client, greedy, 64 different prompts, 16 to 40 tokens each, so requests join and leave the batch at different
steps) give zero errors and every output equal, text and finish reason, to the same request run alone; the batch
really holds many of them at once (vllm:num_requests_running sampled during the load); afterwards nothing runs or
waits, the KV cache is empty (vllm:kv_cache_usage_perc 0: the block manager's free count back to its start), and
the server's resident memory (VmRSS) is back within 10% of its value before the load.
The baseline is taken after warm-up loads, identical to the measured one, so that what stays resident by design
counts in it: the allocator's caches, and the KV pool's pages. Those are touched lazily (the pool is zeroed memory
the kernel maps on first write), and the block manager hands out the least recently freed block first (to keep
prefix-cache entries alive longest), so every load touches blocks no earlier one used until the whole pool has
been used once. The pool is therefore sized to twice what the load holds at once (--kv-cache-memory 24M, about 430
blocks; the load needs at most 64 x 4), and warm-up loads repeat until resident memory settles (at most 6).
Heavy: about 10 s here, but minutes under AddressSanitizer, whose quarantine of freed memory would also make the
resident-memory check meaningless there."""
import concurrent.futures
import re
import threading
import time

import openai

import testlib
from testlib import check, finish
from servelib import NAME, http, start, stop

N = 64
WORDS = ["door", "window", "roof", "wall", "floor", "room", "garden", "chair", "table", "stair", "lamp", "clock"]
PROMPTS = [f"The {WORDS[i % 12]} of house {i} was" if i % 2 else f"Number {i}: a {WORDS[(i * 5) % 12]} and"
           for i in range(N)]
MAX_TOKENS = [16 + 8 * (i % 4) for i in range(N)]


def vm_rss_kib(pid):
    return int(re.search(r"^VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read(), re.M).group(1))


def metric(base, name):
    m = re.search(rf'^{re.escape(name)}{{model_name="{NAME}"}} (\S+)$', http("GET", base + "/metrics")[1], re.M)
    return float(m.group(1)) if m else None


proc, base = start(["--max-num-seqs", str(N), "--kv-cache-memory", "24M"])
try:
    if base is None:
        raise SystemExit
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=120)

    def alone(i):
        r = client.completions.create(model=NAME, prompt=PROMPTS[i], max_tokens=MAX_TOKENS[i], temperature=0)
        return r.choices[0].text, r.choices[0].finish_reason

    def streamed(i, barrier):
        barrier.wait()
        parts, finish_reason = [], None
        for ch in client.completions.create(model=NAME, prompt=PROMPTS[i], max_tokens=MAX_TOKENS[i], temperature=0,
                                            stream=True):
            for c in ch.choices:
                parts.append(c.text)
                finish_reason = c.finish_reason or finish_reason
        return "".join(parts), finish_reason

    def load():
        """The 64 streams released together; returns (outputs or exceptions, seconds, most running at once)."""
        barrier = threading.Barrier(N)
        peak, done = [0], threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], metric(base, "vllm:num_requests_running") or 0)
                time.sleep(0.02)
        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(N) as ex:
            futs = [ex.submit(streamed, i, barrier) for i in range(N)]
            outs = []
            for f in futs:
                try:
                    outs.append(f.result())
                except Exception as e:  # an error is a result to count, not a crash of the test
                    outs.append(e)
        secs = time.time() - t0
        done.set()
        sampler.join()
        return outs, secs, peak[0]

    t0 = time.time()
    ref = [alone(i) for i in range(N)]
    t_alone = time.time() - t0
    check(all(isinstance(t, str) and t for t, _ in ref), "every request alone produced text")

    rss0, rounds = vm_rss_kib(proc.pid), 0
    while rounds < 6:  # warm-up loads until resident memory settles
        warm, _, _ = load()
        rounds += 1
        check(all(not isinstance(o, Exception) for o in warm), f"warm-up load {rounds} without errors")
        time.sleep(0.3)
        rss, rss0 = rss0, vm_rss_kib(proc.pid)
        if rounds > 1 and abs(rss0 - rss) < 1024:
            break
    preempt0 = metric(base, "vllm:num_preemptions_total")

    outs, secs, peak = load()
    errors = [o for o in outs if isinstance(o, Exception)]
    check(not errors, f"zero errors: {len(errors)} ({errors[:2]})")
    diff = [i for i, o in enumerate(outs) if o != ref[i]]
    check(not diff, f"every stream equals its request alone: {len(diff)} differ, e.g. "
          f"{[(PROMPTS[i], outs[i], ref[i]) for i in diff[:2]]}")
    check(peak >= 16, f"the batch held many requests at once: at most {peak:.0f} running")
    check(metric(base, "vllm:num_preemptions_total") == preempt0, "no preemption: the pool held the load")
    state = (metric(base, "vllm:num_requests_running"), metric(base, "vllm:num_requests_waiting"),
             metric(base, "vllm:kv_cache_usage_perc"))
    check(state == (0, 0, 0), f"after the load: running, waiting, kv usage = {state}")
    time.sleep(0.5)
    rss1 = vm_rss_kib(proc.pid)
    check(abs(rss1 - rss0) <= 0.10 * rss0, f"resident memory back within 10%: {rss0 >> 10} -> {rss1 >> 10} MiB")
    print(f"64 requests: alone one after another {t_alone:.1f} s, 64 concurrent streams {secs:.1f} s "
          f"(at most {peak:.0f} running at once); {rounds} warm-up loads; VmRSS {rss0 >> 10} -> {rss1 >> 10} MiB")
finally:
    stop(proc, show_log=testlib.failures > 0)
finish("serve load")
