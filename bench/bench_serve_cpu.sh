#!/usr/bin/env bash
# bench_serve_cpu.sh — `assay serve` next to llama.cpp's `llama-server` on this CPU: the same GGUF file, the same
# threads and context budget, the same load from the same load generator (`assay bench-serve`, vLLM's measures).
#
#   bench/bench_serve_cpu.sh LLAMA_SERVER [BUILD_DIR] [MODEL]
#     LLAMA_SERVER  the llama-server binary
#     BUILD_DIR     assay's build directory (default build)
#     MODEL         a .gguf file, or bf16 (default) / q8_0: the house model made into that GGUF under
#                   BUILD_DIR/bench (`assay convert --dtype bf16`, `assay quantize --scheme q8_0`)
#   env: CONCURRENCY="1 8 32"  INPUT_LEN=256  OUTPUT_LEN=128  NUM_PROMPTS (default per level: 10 x concurrency,
#        at least 100)  THREADS (default: every core)  SLOTS (sequences each server runs at once; default the
#        largest concurrency)  CTX=512 (positions per sequence)  REPS=1  SEED=0  OUT=bench/results/serve_cpu
#        LLAMA_FA=off (llama-server's -fa)  LLAMA_ARGS, ASSAY_ARGS (more flags for either server)
#        BENCH_TIMEOUT=1800 (seconds one bench-serve run, the warm-up or a level, may take before it is stopped)
#
# The load, as the issue asks: random prompts of INPUT_LEN tokens, OUTPUT_LEN output tokens each (--ignore-eos, so
# every request runs to OUTPUT_LEN; the script checks each server's usage says so), all arrivals at once and at most
# CONCURRENCY requests in flight, greedy. bench-serve cuts the prompts to their exact length with the server's own
# /tokenize and /detokenize, from a seeded generator: both servers tokenize the same GGUF vocabulary alike, so they
# get the same prompts (the script checks the input lengths and compares the generated texts). Each level has its
# own seed (SEED + concurrency), so no level finds the prompts of another in a prefix cache.
#
# The servers, one at a time (in each repeat: assay first in odd repeats, llama-server first in even ones):
#   assay serve MODEL -t THREADS --max-num-seqs SLOTS --max-model-len CTX            (KV pool: SLOTS x CTX tokens)
#   llama-server -m MODEL -t THREADS -tb THREADS --parallel SLOTS -c SLOTS*CTX -cb -fa off
#                                                                                    (one slot of CTX per sequence)
# everything else at each server's defaults (both: prefix caching on; a step takes at most 2048 tokens, assay's
# --max-num-batched-tokens and llama-server's -b). Flash attention is off because that is llama-server's faster
# setting here: its default, auto, turns it on, and on the 2-core Xeon with the house model llama-bench decodes at
# depth 256 at 445 tok/s without it, 319 with it; llama-server's output throughput was about 1.2x higher without it
# at concurrency 1, 8 and 32 (LLAMA_FA=auto measures the default). Each start waits for /health, then a warm-up of
# SLOTS requests of the full shape at concurrency SLOTS (not counted), then every level; SIGTERM stops it and its
# exit status is recorded. The server's CPU time (user + sys of its process, from /proc) and the wall time are read
# around each level (its prompt preparation through /tokenize included): output tokens per server CPU-second depends
# less on other jobs of a shared machine than wall-clock throughput does, though not at all on a busy one (threads
# that spin while they wait for a descheduled sibling, as llama.cpp's OpenMP threads do, burn CPU time too).
# bench-serve runs on the same machine, unpinned, for both alike.
#
# Nothing waits forever: bench-serve's own limits (--request-timeout, --ready-check-timeout-sec) end a call that
# stalls, BENCH_TIMEOUT ends a bench-serve run, each curl call has a limit, a server that does not stop within 30 s of
# SIGTERM is killed; each of these stops the script with the reason and the log's tail. It refuses an assay binary
# older than a source file it is built from (a build that missed a change, e.g. after a merge or rebase, would
# be measured and recorded under the commit it is not: once that was a bench-serve without the /tokenize fix, which
# looped on llama-server's /tokenize for 20 minutes of the warm-up).
#
# Prints progress and one table; writes $OUT.md (the table, the ratios assay / llama-server, the machine, the exact
# commands, llama-server --version) and $OUT.json (every level's bench-serve result less the per-request lists, and
# the same metadata).
set -euo pipefail
LLAMA=${1:?usage: bench_serve_cpu.sh LLAMA_SERVER [BUILD_DIR] [MODEL]}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${2:-$SRC/build}" && pwd)
MODEL=${3:-bf16}
CONCURRENCY=${CONCURRENCY:-1 8 32}
INPUT_LEN=${INPUT_LEN:-256}
OUTPUT_LEN=${OUTPUT_LEN:-128}
NUM_PROMPTS=${NUM_PROMPTS:-}
THREADS=${THREADS:-$(nproc)}
CTX=${CTX:-512}
REPS=${REPS:-1}
SEED=${SEED:-0}
LLAMA_FA=${LLAMA_FA:-off}
OUT=${OUT:-$SRC/bench/results/serve_cpu}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-1800}
ASSAY=$BUILD/assay
max_c=0
for c in $CONCURRENCY; do if [ "$c" -gt "$max_c" ]; then max_c=$c; fi; done
SLOTS=${SLOTS:-$max_c}
[ -x "$ASSAY" ] || { echo "bench_serve_cpu.sh: $ASSAY missing (cmake --build $BUILD)"; exit 1; }
[ -x "$LLAMA" ] || { echo "bench_serve_cpu.sh: $LLAMA is not an executable llama-server"; exit 1; }
command -v curl >/dev/null || { echo "bench_serve_cpu.sh: needs curl"; exit 1; }
command -v timeout >/dev/null || { echo "bench_serve_cpu.sh: needs timeout (coreutils)"; exit 1; }
# the binary must be newer than every source it is built from (the CUDA sources aside: a CPU build has none of them)
newer=$(cd "$SRC" && find src tools include -path src/backend/cuda -prune -o \( -name '*.c' -o -name '*.h' \) \
    ! -name '*cuda*' -newer "$ASSAY" -print | sort)
if [ -n "$newer" ]; then
    echo "bench_serve_cpu.sh: $ASSAY is older than $(echo "$newer" | wc -l) of its sources ($(echo "$newer" | head -3 |
        tr '\n' ' ')...): rebuild it (cmake --build $BUILD); the results would record a commit the binary is not"
    exit 1
fi
[ "$SLOTS" -ge "$max_c" ] || { echo "bench_serve_cpu.sh: SLOTS=$SLOTS is below the largest concurrency $max_c"; exit 1; }
[ "$CTX" -gt $((INPUT_LEN + OUTPUT_LEN)) ] || { echo "bench_serve_cpu.sh: CTX=$CTX must exceed INPUT_LEN + OUTPUT_LEN"; exit 1; }

# the command as recorded with the results (paths of this machine left out)
model_arg=$MODEL
case "$MODEL" in bf16 | q8_0) ;; *) model_arg=MODEL.gguf ;; esac
export BENCH_CMD="CONCURRENCY=\"$CONCURRENCY\" INPUT_LEN=$INPUT_LEN OUTPUT_LEN=$OUTPUT_LEN${NUM_PROMPTS:+ NUM_PROMPTS=$NUM_PROMPTS} \
THREADS=$THREADS SLOTS=$SLOTS CTX=$CTX REPS=$REPS SEED=$SEED LLAMA_FA=$LLAMA_FA${LLAMA_ARGS:+ LLAMA_ARGS=\"$LLAMA_ARGS\"}\
${ASSAY_ARGS:+ ASSAY_ARGS=\"$ASSAY_ARGS\"} bench/bench_serve_cpu.sh LLAMA_SERVER${2:+ BUILD_DIR} $model_arg"

case "$MODEL" in
bf16 | q8_0) # as bench_cpu.sh makes them: the bf16 GGUF by assay convert, q8_0 from it by assay quantize
    SHARED=${ASSAY_SHARED:-$SRC/../shared}
    HOUSE=$BUILD/bench/house-bf16.gguf
    if [ ! -f "$HOUSE" ]; then
        mkdir -p "$BUILD/bench"
        echo "making $HOUSE"
        "$ASSAY" convert "$SHARED/models/house" -o "$HOUSE" >/dev/null
    fi
    if [ "$MODEL" = q8_0 ] && [ ! -f "$BUILD/bench/house-q8_0.gguf" ]; then
        echo "making $BUILD/bench/house-q8_0.gguf"
        "$ASSAY" quantize "$HOUSE" -o "$BUILD/bench/house-q8_0.gguf" -s q8_0 >/dev/null
    fi
    MODEL=$BUILD/bench/house-$MODEL.gguf
    ;;
esac
[ -f "$MODEL" ] || { echo "bench_serve_cpu.sh: model $MODEL missing"; exit 1; }
NAME=$(basename "$MODEL" .gguf)

TMP=$(mktemp -d)
SERVER_PID=
stop_server() { # stop_server LABEL: SIGTERM, then wait (30 s, then SIGKILL); the exit status -> $TMP/LABEL.exit
    local pid=$SERVER_PID rc=0
    [ -n "$pid" ] || return 0
    SERVER_PID=
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "  $1 did not stop 30 s after SIGTERM: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" || rc=$?
    echo "$rc" >"$TMP/$1.exit"
}
trap 'stop_server cleanup; rm -rf "$TMP"' EXIT

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT
read -ra ASSAY_EXTRA <<<"${ASSAY_ARGS:-}"
read -ra LLAMA_EXTRA <<<"${LLAMA_ARGS:-}"
ASSAY_CMD=("$ASSAY" serve "$MODEL" --port "$PORT" --served-model-name "$NAME" -t "$THREADS" --max-num-seqs "$SLOTS"
           --max-model-len "$CTX" -v "${ASSAY_EXTRA[@]}")
LLAMA_CMD=("$LLAMA" -m "$MODEL" --port "$PORT" --host 127.0.0.1 --alias "$NAME" -t "$THREADS" -tb "$THREADS"
           --parallel "$SLOTS" -c $((SLOTS * CTX)) -cb -fa "$LLAMA_FA" --no-webui "${LLAMA_EXTRA[@]}")

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + sys of the process, all its threads, in ticks
num_prompts() { if [ -n "$NUM_PROMPTS" ]; then echo "$NUM_PROMPTS"; elif [ $((10 * $1)) -gt 100 ]; then echo $((10 * $1)); else echo 100; fi; }
bench() { # bench OUT_JSON LOG CONCURRENCY N SEED: bench-serve, stopped after BENCH_TIMEOUT seconds (status 124)
    timeout -k 10 "$BENCH_TIMEOUT" "$ASSAY" bench-serve --base-url "$BASE" --model "$NAME" --dataset-name random \
        --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" --num-prompts "$4" --max-concurrency "$3" \
        --seed "$5" --ignore-eos --result-file "$1" >"$2" 2>&1 || {
        local rc=$?
        [ "$rc" != 124 ] && [ "$rc" != 137 ] ||
            echo "bench-serve did not finish in $BENCH_TIMEOUT s (BENCH_TIMEOUT): stopped" >>"$2"
        return "$rc"
    }
}

# run_server WHO REP: start, wait for /health, warm up, every level, stop
run_server() {
    local who=$1 rep=$2 label=$1.r$2 code= c n deadline=$((SECONDS + 120))
    local -a cmd
    if [ "$who" = assay ]; then cmd=("${ASSAY_CMD[@]}"); else cmd=("${LLAMA_CMD[@]}"); fi
    echo "[$(date +%T)] repeat $rep: starting $who"
    "${cmd[@]}" >"$TMP/$label.log" 2>&1 &
    SERVER_PID=$!
    while [ "$SECONDS" -lt "$deadline" ]; do
        code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$BASE/health" || true)
        [ "$code" = 200 ] && break
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "bench_serve_cpu.sh: $who exited at start:"; tail -20 "$TMP/$label.log"; exit 1; }
        sleep 0.1
    done
    [ "$code" = 200 ] || { echo "bench_serve_cpu.sh: $who has no healthy /health after 120 s"; tail -20 "$TMP/$label.log"; exit 1; }
    # one plain request: the prompt tokens each server counts for the same text (BOS or not)
    curl -s -m 300 "$BASE/v1/completions" -H 'Content-Type: application/json' \
        -d "{\"model\": \"$NAME\", \"prompt\": \"The house\", \"max_tokens\": 1, \"temperature\": 0}" \
        >"$TMP/$label.probe.json" || { echo "bench_serve_cpu.sh: $who: the probe request failed or took over 300 s"; exit 1; }
    echo "[$(date +%T)]   $who healthy; warm-up: $SLOTS requests at concurrency $SLOTS"
    bench "$TMP/$label.warmup.json" "$TMP/$label.warmup.log" "$SLOTS" "$SLOTS" $((SEED + 100000)) ||
        { echo "bench_serve_cpu.sh: $who warm-up failed:"; tail -20 "$TMP/$label.warmup.log"
          echo "$who's log:"; tail -5 "$TMP/$label.log"; exit 1; }
    for c in $CONCURRENCY; do
        n=$(num_prompts "$c")
        local t0 t1 w0
        t0=$(cpu_ticks "$SERVER_PID")
        w0=$(date +%s.%N)
        bench "$TMP/$label.c$c.json" "$TMP/$label.c$c.log" "$c" "$n" $((SEED + c)) ||
            { echo "bench_serve_cpu.sh: bench-serve against $who failed at concurrency $c:"; tail -20 "$TMP/$label.c$c.log"
              echo "$who's log:"; tail -5 "$TMP/$label.log"; exit 1; }
        t1=$(cpu_ticks "$SERVER_PID")
        echo "$((t1 - t0)) $(awk -v a="$w0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')" >"$TMP/$label.c$c.ticks"
        echo "[$(date +%T)]   $who c=$c ($n requests): $(awk -F: '/Output token throughput/ {gsub(/ /, "", $2); o = $2}
            /Median TTFT/ {gsub(/ /, "", $2); t = $2} /P99 TTFT/ {gsub(/ /, "", $2); p = $2}
            END {printf "%s tok/s out, TTFT median %s ms, p99 %s ms", o, t, p}' "$TMP/$label.c$c.log")"
    done
    stop_server "$label"
    echo "[$(date +%T)]   $who stopped (exit status $(cat "$TMP/$label.exit"))"
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average: $LOAD_START"
awk '{exit !($1 > 0.5)}' /proc/loadavg &&
    echo "note: load average ${LOAD_START%% *} before the start: other jobs share this CPU (the servers run $THREADS threads on $(nproc) cores)"
echo "model $MODEL; threads $THREADS, slots $SLOTS x $CTX positions; load: $INPUT_LEN in / $OUTPUT_LEN out, concurrency $CONCURRENCY"
"$LLAMA" --version >"$TMP/llama_version.txt" 2>&1 || true
echo "llama-server: $(head -1 "$TMP/llama_version.txt")"
for rep in $(seq 1 "$REPS"); do
    if [ $((rep % 2)) = 1 ]; then order="assay llama"; else order="llama assay"; fi
    for who in $order; do run_server "$who" "$rep"; done
done

mkdir -p "$(dirname "$OUT")"
python3 - "$TMP" "$OUT" "$SRC" "$MODEL" "$LLAMA" "$REPS" "$SLOTS" "$CTX" "$THREADS" "$INPUT_LEN" "$OUTPUT_LEN" \
    "$SEED" "$LOAD_START" "$CONCURRENCY" "$(getconf CLK_TCK)" "${NUM_PROMPTS:-auto}" "$PORT" \
    "${ASSAY_CMD[*]}" "${LLAMA_CMD[*]}" <<'EOF'
import hashlib, json, os, re, statistics, subprocess, sys, time

(tmp, out, src, model, llama, reps, slots, ctx, threads, in_len, out_len, seed, load_start, conc, clk_tck, num_prompts,
 port, assay_cmd, llama_cmd) = sys.argv[1:]
reps, slots, ctx, threads, in_len, out_len, seed, clk_tck = map(int, (reps, slots, ctx, threads, in_len, out_len, seed, clk_tck))
conc = [int(c) for c in conc.split()]
rel = lambda p: os.path.relpath(p, src)          # paths as seen from the repository root
show = lambda cmd: " ".join("LLAMA_SERVER" if w == llama else rel(w) if os.path.isabs(w) else w
                            for w in cmd.split()).replace(f"--port {port}", "--port PORT")
scrub = lambda line: line.replace(src + "/", "").replace(f":{port}", ":PORT")  # a log line, as the commands show
WHO = {"assay": "assay serve", "llama": "llama-server"}
KEYS = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
        "output_throughput", "total_token_throughput"] + \
       [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "std", "p99")]

runs, problems = [], []
for rep in range(1, reps + 1):
    for who in WHO:
        label = f"{who}.r{rep}"
        exit_status = int(open(f"{tmp}/{label}.exit").read())
        if exit_status != 0:
            problems.append(f"{WHO[who]} (repeat {rep}) exited with status {exit_status} after SIGTERM")
        for c in conc:
            r = json.load(open(f"{tmp}/{label}.c{c}.json"))
            ticks, wall = open(f"{tmp}/{label}.c{c}.ticks").read().split()
            ticks = int(ticks)
            row = {"server": who, "rep": rep, "concurrency": c, "num_prompts": r["num_prompts"],
                   **{k: r[k] for k in KEYS}, "server_cpu_s": ticks / clk_tck, "level_wall_s": float(wall),
                   "out_tok_per_server_cpu_s": r["total_output_tokens"] / max(ticks / clk_tck, 1e-3),
                   "server_exit_status": exit_status,
                   "_input_lens": r["input_lens"], "_output_lens": r["output_lens"], "_texts": r["generated_texts"]}
            if r["failed"]:
                problems.append(f"{WHO[who]} c={c} repeat {rep}: {r['failed']} failed requests "
                                f"({next((e for e in r['errors'] if e), '')})")
            bad = [x for x, err in zip(r["output_lens"], r["errors"]) if not err and x != out_len]
            if bad:
                problems.append(f"{WHO[who]} c={c} repeat {rep}: output lengths {sorted(set(bad))}, not {out_len}")
            runs.append(row)

# the same prompts for both: input lengths equal request by request; generated texts compared (greedy, but bf16
# and q8_0 arithmetic differ between the two, so a text may part ways after a while)
same = {}
for rep in range(1, reps + 1):
    for c in conc:
        a, l = [next(x for x in runs if x["server"] == w and x["rep"] == rep and x["concurrency"] == c) for w in WHO]
        if a["_input_lens"] != l["_input_lens"]:
            problems.append(f"c={c} repeat {rep}: input lengths differ between the servers (not the same prompts)")
        n = len(a["_texts"])
        same[f"c{c}.r{rep}"] = {"requests": n, "identical_text": sum(x == y for x, y in zip(a["_texts"], l["_texts"])),
                                "same_first_32_chars": sum(x[:32] == y[:32] for x, y in zip(a["_texts"], l["_texts"]))}
probes = {}
for who in WHO:
    try:
        probes[who] = json.load(open(f"{tmp}/{who}.r1.probe.json"))["usage"]["prompt_tokens"]
    except (OSError, ValueError, KeyError, TypeError):
        probes[who] = None
if probes["assay"] != probes["llama"]:
    problems.append(f"the prompt 'The house' counts {probes['assay']} tokens in assay serve, {probes['llama']} in llama-server")

# per (server, concurrency): the median over repeats of each measure
agg = {}
for who in WHO:
    for c in conc:
        xs = [x for x in runs if x["server"] == who and x["concurrency"] == c]
        agg[(who, c)] = {k: statistics.median(x[k] for x in xs) for k in KEYS + ["server_cpu_s", "out_tok_per_server_cpu_s"]}
ratios = {}
for c in conc:
    a, l = agg[("assay", c)], agg[("llama", c)]
    q = lambda k: a[k] / l[k] if l[k] else None
    ratios[c] = {"output_throughput": q("output_throughput"), "request_throughput": q("request_throughput"),
                 "median_ttft_ms": q("median_ttft_ms"), "p99_ttft_ms": q("p99_ttft_ms"),
                 "median_tpot_ms": q("median_tpot_ms"), "median_itl_ms": q("median_itl_ms"),
                 "p99_itl_ms": q("p99_itl_ms"), "out_tok_per_server_cpu_s": q("out_tok_per_server_cpu_s")}

def log_lines(path, pattern):
    try:
        return [l.rstrip() for l in open(path, errors="replace") if re.search(pattern, l)]
    except OSError:
        return []

def git(*a):
    try:
        return subprocess.run(["git", "-C", src, *a], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""

cpuinfo = open("/proc/cpuinfo").read()
flags = next((l.split(":", 1)[1].split() for l in cpuinfo.splitlines() if l.startswith("flags")), [])
simd = [f for f in flags if re.match(r"(sse4|avx|fma|f16c|amx|vnni|bmi2)", f)]
bench_bin = show(assay_cmd).split()[0]
h = hashlib.sha256()
with open(model, "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
meta = {
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "commit": git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else ""),
    "cpu": next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")), "?"),
    "cores": os.cpu_count(), "cpu_simd_flags": simd, "cpu_flags": flags,
    "load_average_start": load_start.split(), "load_average_end": open("/proc/loadavg").read().split()[:3],
    "model": rel(model), "model_bytes": os.path.getsize(model), "model_sha256": h.hexdigest(),
    "llama_server_version": open(f"{tmp}/llama_version.txt", errors="replace").read().strip(),
    "llama_server_system_info": (log_lines(f"{tmp}/llama.r1.log", r"system_info") or [""])[0],
    "assay_engine": [scrub(l) for l in log_lines(f"{tmp}/assay.r1.log", r"^assay serve: (?!SIG)")],
    "llama_server_flash_attn": os.environ.get("LLAMA_FA", "off"),
    "threads": threads, "slots": slots, "ctx_per_sequence": ctx, "input_len": in_len, "output_len": out_len,
    "concurrency": conc, "num_prompts": num_prompts, "reps": reps, "seed": seed,
    "prompt_tokens_of_the_house": probes, "same_prompts_check": same,
    "command": os.environ.get("BENCH_CMD", ""),
    "commands": {
        "assay": show(assay_cmd),
        "llama": show(llama_cmd),
        "warmup": f"{bench_bin} bench-serve --base-url http://127.0.0.1:PORT --model NAME --dataset-name random "
                  f"--random-input-len {in_len} --random-output-len {out_len} --num-prompts {slots} "
                  f"--max-concurrency {slots} --seed {seed + 100000} --ignore-eos",
        "level": f"{bench_bin} bench-serve --base-url http://127.0.0.1:PORT --model NAME --dataset-name random "
                 f"--random-input-len {in_len} --random-output-len {out_len} --num-prompts N --max-concurrency C "
                 f"--seed {seed}+C --ignore-eos --result-file FILE",
    },
    "problems": problems,
}
rows = [{k: v for k, v in x.items() if not k.startswith("_")} for x in runs]
with open(out + ".json", "w") as f:
    json.dump({"meta": meta, "median_over_reps": [{"server": w, "concurrency": c, **agg[(w, c)]} for (w, c) in agg],
               "ratios_assay_over_llama_server": {str(c): r for c, r in ratios.items()}, "runs": rows}, f, indent=1)

f2 = lambda v: "-" if v is None else f"{v:.2f}"
hdr = ["conc", "server", "req/s", "out tok/s", "TTFT median ms", "TTFT p99 ms", "TPOT median ms", "TPOT p99 ms",
       "ITL median ms", "ITL p99 ms", "E2EL median ms", "out tok / server CPU-s"]
lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
for c in conc:
    for who in WHO:
        g = agg[(who, c)]
        lines.append(f"| {c} | {WHO[who]} | {g['request_throughput']:.2f} | {g['output_throughput']:.1f} | "
                     f"{g['median_ttft_ms']:.1f} | {g['p99_ttft_ms']:.1f} | {g['median_tpot_ms']:.2f} | "
                     f"{g['p99_tpot_ms']:.2f} | {g['median_itl_ms']:.2f} | {g['p99_itl_ms']:.2f} | "
                     f"{g['median_e2el_ms']:.0f} | {g['out_tok_per_server_cpu_s']:.0f} |")
    r = ratios[c]
    lines.append(f"| {c} | **assay / llama-server** | {f2(r['request_throughput'])} | **{f2(r['output_throughput'])}** | "
                 f"{f2(r['median_ttft_ms'])} | **{f2(r['p99_ttft_ms'])}** | {f2(r['median_tpot_ms'])} | - | "
                 f"{f2(r['median_itl_ms'])} | {f2(r['p99_itl_ms'])} | - | {f2(r['out_tok_per_server_cpu_s'])} |")
table = "\n".join(lines)
target = []
for c in conc:
    r = ratios[c]
    if c in (8, 32):
        ok_t = r["output_throughput"] is not None and r["output_throughput"] >= 1.5
        ok_p = r["p99_ttft_ms"] is not None and r["p99_ttft_ms"] < 1
        target.append(f"- concurrency {c}: output throughput {f2(r['output_throughput'])}x llama-server's "
                      f"(target >= 1.5: {'met' if ok_t else 'not met'}); TTFT p99 {f2(r['p99_ttft_ms'])}x "
                      f"(target < 1: {'met' if ok_p else 'not met'})")
print(table)
print("\n".join(target))
for p in problems:
    print("PROBLEM:", p)
n_desc = num_prompts if num_prompts != "auto" else "10 x concurrency, at least 100"
with open(out + ".md", "w") as f:
    f.write(f"# Serving on the CPU: assay serve vs llama-server ({meta['date_utc']}, commit {meta['commit']})\n\n"
            f"{meta['cpu']}, {meta['cores']} cores ({' '.join(simd)}); load average "
            f"{' '.join(meta['load_average_start'])} at the start, {' '.join(meta['load_average_end'])} at the end.\n\n"
            f"Model `{meta['model']}` ({meta['model_bytes']} bytes, sha256 {meta['model_sha256'][:16]}...), the same "
            f"file for both. Load (`assay bench-serve`, random dataset): {in_len} prompt tokens, {out_len} output "
            f"tokens (`--ignore-eos`), all arrivals at once, at most C in flight; requests per level: {n_desc}; "
            f"greedy; {reps} repeat(s), each measure the median over repeats. Both servers: {threads} threads, "
            f"{slots} sequences at once of {ctx} positions each; llama-server's flash attention "
            f"{meta['llama_server_flash_attn']} (off is its faster setting on the house model here).\n\n"
            f"{table}\n\nThe issue's targets (assay / llama-server):\n" + "\n".join(target) + "\n\n"
            f"TPOT = (E2EL - TTFT) / (output tokens - 1) per request; ITL = the gaps between streamed tokens; "
            f"out tok / server CPU-s = output tokens over the server process's user + sys time during the level "
            f"(less sensitive to other jobs than wall time).\n\n"
            + (f"Checks: none failed: every request of every level succeeded with {out_len} output tokens by the "
               f"server's usage, the input lengths are equal request by request, and 'The house' counts "
               f"{probes['assay']} prompt tokens on both. " if not problems else
               "Checks: PROBLEMS: " + "; ".join(problems) + ". ") +
            f"Generated texts identical / same first 32 characters (greedy; the two round their arithmetic "
            f"differently): " +
            ", ".join(f"{k} {v['identical_text']} / {v['same_first_32_chars']} of {v['requests']}" for k, v in same.items()) +
            f".\n\nCommand: `{meta['command']}`; what it ran (from the repository root; LLAMA_SERVER the "
            "llama-server binary given, PORT a free port, NAME the model file's name without .gguf; each server "
            "stopped by SIGTERM):\n\n"
            f"    {meta['commands']['assay']}\n    {meta['commands']['llama']}\n"
            f"    # warm-up, not counted:\n    {meta['commands']['warmup']}\n"
            f"    # each level C:\n    {meta['commands']['level']}\n\n"
            f"llama-server --version: `{' / '.join(meta['llama_server_version'].splitlines())}`\n\n"
            f"llama-server's system_info: `{meta['llama_server_system_info'].split('system_info: ', 1)[-1].strip()}`\n\n"
            "assay serve -v:\n\n" + "".join(f"    {l}\n" for l in meta["assay_engine"]) + "\n")
print(f"wrote {out}.json and {out}.md")
EOF
