"""test_serve_prometheus.py — a real Prometheus server (Debian's prometheus package, scripts/setup-tests.sh) scrapes
`assay serve` on the house model every second while a short load runs, and PromQL through Prometheus's HTTP API
sees what a dashboard would: `rate(vllm:generation_tokens_total[1m]) > 0` during the load, with the model_name
label; the running-requests gauge; a TTFT quantile from vLLM's histogram; the target healthy. Bounded: a 1 s scrape
interval and about 5 s of load. Skipped, with the reason printed, when the prometheus binary is missing."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse

import testlib
from testlib import check, finish, scratch_dir
from servelib import NAME, free_port, http, start, stop

prom_bin = shutil.which("prometheus")
if not prom_bin:
    print("SKIP: no prometheus binary (Debian's prometheus package; scripts/setup-tests.sh installs it)")
    raise SystemExit(0)

tmp = scratch_dir("serve-prometheus-")


def query(prom, q):
    """The result vector of an instant query, as [(labels, value)]; [] on any error."""
    st, b = http("GET", f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
    try:
        d = json.loads(b)
        if st != 200 or d.get("status") != "success":
            return []
        return [(r["metric"], float(r["value"][1])) for r in d["data"]["result"]]
    except (ValueError, KeyError):
        return []


proc, base = start()
prom = None
try:
    if base is None:
        raise SystemExit
    target = base.split("//", 1)[1]
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                f"  - job_name: assay\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n")
    pport = free_port()
    pbase = f"http://127.0.0.1:{pport}"
    prom = subprocess.Popen([prom_bin, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(tmp, 'data')}",
                             f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for _ in range(150):
        try:
            if http("GET", pbase + "/-/ready", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    if not check(http("GET", pbase + "/-/ready")[0] == 200, "prometheus is ready"):
        raise SystemExit
    for _ in range(100):  # the first scrapes
        if [v for _, v in query(pbase, 'up{job="assay"}')] == [1.0]:
            break
        time.sleep(0.1)
    check([v for _, v in query(pbase, 'up{job="assay"}')] == [1.0], "the server is a healthy target (up == 1)")

    # a short load: 4 clients asking one after another for about 5 s
    stop_load = threading.Event()
    counts = [0] * 4

    def client(i):
        while not stop_load.is_set():
            st, _ = http("POST", base + "/v1/completions", {"model": NAME, "prompt": f"Client {i} and the house",
                                                            "max_tokens": 16, "temperature": 0.7, "seed": counts[i]})
            counts[i] += st == 200
    load = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in load:
        t.start()
    rate, running_seen = [], False
    t0 = time.time()
    while time.time() - t0 < 15:
        time.sleep(0.5)
        running_seen = running_seen or any(v > 0 for _, v in query(pbase, "vllm:num_requests_running"))
        rate = query(pbase, "rate(vllm:generation_tokens_total[1m]) > 0")
        if rate and running_seen and time.time() - t0 > 4:
            break
    stop_load.set()
    for t in load:
        t.join()
    check(sum(counts) > 0, f"the load ran: {sum(counts)} requests")
    check(len(rate) == 1 and rate[0][1] > 0 and rate[0][0].get("model_name") == NAME and rate[0][0].get("job") == "assay",
          f"rate(vllm:generation_tokens_total[1m]) > 0 during the load: {rate}")
    check(running_seen, "vllm:num_requests_running > 0 was scraped during the load")
    ttft = query(pbase, "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))")
    check(len(ttft) == 1 and 0 < ttft[0][1] < 10, f"median TTFT from vLLM's histogram: {ttft}")
    total = query(pbase, 'vllm:generation_tokens_total{model_name="house"}')
    served = float(http("GET", base + "/metrics")[1].split('vllm:generation_tokens_total{model_name="house"} ')[1].split()[0])
    check(len(total) == 1 and 0 < total[0][1] <= served, f"the scraped counter {total} is at most the server's {served}")
    print(f"{sum(counts)} requests in {time.time() - t0:.1f} s; Prometheus: rate {rate[0][1] if rate else None:.1f} "
          f"tokens/s over 1m, median TTFT {ttft[0][1] if ttft else float('nan'):.3f} s")
finally:
    if prom and prom.poll() is None:
        prom.send_signal(signal.SIGTERM)
        try:
            prom.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prom.kill()
    if prom and testlib.failures:
        print(prom.stdout.read()[-2000:])
    stop(proc, show_log=testlib.failures > 0)
finish("prometheus scrapes serve")
