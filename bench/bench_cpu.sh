#!/usr/bin/env bash
# bench_cpu.sh — CPU prefill/decode speed of assay next to llama.cpp on the same GGUF files, in the same run,
# against this machine's measured memory read bandwidth.
#
#   bench/bench_cpu.sh LLAMA_CPP_BIN_DIR [BUILD_DIR]
#   env: REPS=3  THREADS="1 2"  N_PROMPT=512  N_GEN=128  OUT=bench/results/cpu_bench
#        MODELS="path.gguf ..." (default: the house model converted to bf16 GGUF with `assay convert`, its q8_0 and
#        q4_k_m quantizations made with `assay quantize`, and SmolLM2-135M-Instruct Q4_1 from .models/)
#
# For every model, thread count and phase (pp = one batch of N_PROMPT tokens, tg = N_GEN tokens one by one),
# bench_cpu and llama-bench run back to back, each in its own process with the same warm-up (llama-bench's:
# one full prompt, one decode token), and tok/s is the median of REPS repeats (llama-bench's samples_ts).
# Both processes are also timed with /usr/bin/time: tokens per CPU-second (all tokens run, warm-up included,
# divided by user+sys time less the start-up CPU time of a one-token run of the same tool and model) is less
# sensitive than wall time to other jobs on a shared machine.
# GB/s of weights = (bytes of weights one decode step reads) x tok/s; the ceiling is a streaming read
# (bench_cpu bw) of a buffer the size of those weights and of a 1 GiB buffer, on the same thread count.
# Prints one table; $OUT.json and $OUT.md keep one entry per machine (CPU model, the SIMD flags that pick kernels,
# cores): this run's replaces the same machine's, other machines' stay; the text above the first machine section of
# $OUT.md is kept as it is.
set -euo pipefail
LLAMA=${1:?usage: bench_cpu.sh LLAMA_CPP_BIN_DIR [BUILD_DIR]}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${2:-$SRC/build}
REPS=${REPS:-3}
THREADS=${THREADS:-1 2}
N_PROMPT=${N_PROMPT:-512}
N_GEN=${N_GEN:-128}
OUT=${OUT:-$SRC/bench/results/cpu_bench}
BENCH=$BUILD/bench_cpu
# the command as recorded with the results (paths of this machine left out)
export BENCH_CMD="REPS=$REPS THREADS=\"$THREADS\" N_PROMPT=$N_PROMPT N_GEN=$N_GEN${MODELS:+ MODELS=...} bench/bench_cpu.sh LLAMA_CPP_BIN_DIR${2:+ BUILD_DIR}"
[ -x "$BENCH" ] || { echo "bench_cpu.sh: $BENCH missing (cmake --build $BUILD --target bench_cpu)"; exit 1; }
[ -x "$LLAMA/llama-bench" ] || { echo "bench_cpu.sh: $LLAMA/llama-bench missing"; exit 1; }
[ -x /usr/bin/time ] || { echo "bench_cpu.sh: needs /usr/bin/time (Debian package 'time')"; exit 1; }

if [ -z "${MODELS:-}" ]; then
    SHARED=${ASSAY_SHARED:-$SRC/../shared}
    HOUSE=$BUILD/bench/house-bf16.gguf
    if [ ! -f "$HOUSE" ]; then
        mkdir -p "$BUILD/bench"
        "$BUILD/assay" convert "$SHARED/models/house" -o "$HOUSE" >/dev/null
    fi
    for q in q8_0 q4_k_m; do
        [ -f "$BUILD/bench/house-$q.gguf" ] || "$BUILD/assay" quantize "$HOUSE" -o "$BUILD/bench/house-$q.gguf" -s $q >/dev/null
    done
    MODELS="$HOUSE $BUILD/bench/house-q8_0.gguf $BUILD/bench/house-q4_k_m.gguf $SRC/.models/SmolLM2-135M-Instruct.Q4_1.gguf"
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
REC=$TMP/records.jsonl
: >"$REC"

# timed RUN_ID CMD...: stdout -> $TMP/RUN_ID.out, CPU seconds (user+sys) -> $TMP/RUN_ID.cpu; exits on failure
timed() {
    timed_peer "$@" || {
        echo "bench_cpu.sh: failed: ${*:2}"
        cat "$TMP/$1.err"
        exit 1
    }
}
# timed_peer: the same, but a failure is recorded (the peer is built elsewhere and may not run every model here)
timed_peer() {
    local id=$1 rc=0
    shift
    /usr/bin/time -f "%U %S" -o "$TMP/$id.time" "$@" >"$TMP/$id.out" 2>"$TMP/$id.err" || rc=$?
    awk '/^[0-9.]+ [0-9.]+$/ {print $1 + $2}' "$TMP/$id.time" >"$TMP/$id.cpu"
    if [ $rc != 0 ]; then
        echo "null" >"$TMP/$id.out"
        echo "null" >"$TMP/$id.cpu"
        echo "\"exit status $rc$( [ $rc = 132 ] && echo ' (SIGILL)')\"" >"$TMP/$id.fail"
        return 1
    fi
    echo "null" >"$TMP/$id.fail"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $THREADS; do
    timed bw_dram_$t "$BENCH" bw "$t" 1024
    echo "{\"rec\":\"bw\",\"size\":\"dram\",$(tail -c +2 "$TMP/bw_dram_$t.out")" >>"$REC"
done
i=0
for m in $MODELS; do
    [ -f "$m" ] || { echo "bench_cpu.sh: model $m missing"; exit 1; }
    mib=$(( ($(stat -L -c %s "$m") + (1 << 20) - 1) >> 20 ))
    # start-up CPU (load, tokenizer, thread start): a one-token run of each tool, subtracted from the runs' CPU time
    timed ovh_ours "$BENCH" model "$m" 1 -p 0 -n 1 -r 1
    ovh_peer=0
    timed_peer ovh_peer "$LLAMA/llama-bench" -m "$m" -t 1 -p 0 -n 1 -r 1 --no-warmup -o json && ovh_peer=$(cat "$TMP/ovh_peer.cpu")
    echo "{\"rec\":\"overhead\",\"model\":\"$m\",\"ours_cpu_s\":$(cat "$TMP/ovh_ours.cpu"),\"peer_cpu_s\":$ovh_peer}" >>"$REC"
    for t in $THREADS; do
        timed bw_m_$t "$BENCH" bw "$t" "$mib"
        echo "{\"rec\":\"bw\",\"size\":\"model\",\"model\":\"$m\",$(tail -c +2 "$TMP/bw_m_$t.out")" >>"$REC"
        for ph in pp tg; do
            if [ $ph = pp ]; then p=$N_PROMPT n=0; else p=0 n=$N_GEN; fi
            i=$((i + 1))
            timed ours_$i "$BENCH" model "$m" "$t" -p $p -n $n -r "$REPS"
            timed_peer peer_$i "$LLAMA/llama-bench" -m "$m" -t "$t" -p $p -n $n -r "$REPS" -o json || true
            echo "{\"rec\":\"run\",\"model\":\"$m\",\"threads\":$t,\"phase\":\"$ph\",\"ours\":$(cat "$TMP/ours_$i.out"),\"ours_cpu_s\":$(cat "$TMP/ours_$i.cpu"),\"peer\":$(cat "$TMP/peer_$i.out"),\"peer_cpu_s\":$(cat "$TMP/peer_$i.cpu"),\"peer_failure\":$(cat "$TMP/peer_$i.fail")}" | tr -d '\n' >>"$REC"
            echo >>"$REC"
            echo "  done: $(basename "$m") t=$t $ph"
        done
    done
done

mkdir -p "$(dirname "$OUT")"
python3 - "$REC" "$OUT" "$REPS" <<'EOF'
import json, os, statistics, subprocess, sys, time

rec_path, out, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
recs = [json.loads(l) for l in open(rec_path) if l.strip()]
bw_dram = {r["threads"]: r["read_gbps"] for r in recs if r["rec"] == "bw" and r["size"] == "dram"}
bw_model = {(r["model"], r["threads"]): r["read_gbps"] for r in recs if r["rec"] == "bw" and r["size"] == "model"}
ovh = {r["model"]: r for r in recs if r["rec"] == "overhead"}
rows = []
for r in recs:
    if r["rec"] != "run":
        continue
    o, peer = r["ours"], (r["peer"] or [None])[0]
    ph, t = r["phase"], r["threads"]
    ours_tps = o["pp_tps"] if ph == "pp" else o["tg_tps"]
    row = {
        "model": os.path.basename(r["model"]), "threads": t, "phase": ph,
        "n_tokens": o["n_prompt"] if ph == "pp" else o["n_gen"],
        "ours_tps": round(ours_tps, 2), "llamacpp_tps": None, "ratio": None,
        "ours_tps_all": o["pp_all"] if ph == "pp" else o["tg_all"], "llamacpp_tps_all": None,
        "ours_tok_per_cpu_s": round(o["tokens_total"] / max(r["ours_cpu_s"] - ovh[r["model"]]["ours_cpu_s"], 1e-3), 2),
        "llamacpp_tok_per_cpu_s": None, "cpu_ratio": None,
        "weight_bytes_per_token": o["weight_bytes"], "kernels": o["kernels"],
        "llamacpp_failure": r.get("peer_failure"),
    }
    if peer:
        peer_tps = statistics.median(peer["samples_ts"])
        # llama-bench: warm-up = one full prompt (pp) or one token (tg), then reps
        peer_tokens = (reps + 1) * peer["n_prompt"] if ph == "pp" else reps * peer["n_gen"] + 1
        row.update({"llamacpp_tps": round(peer_tps, 2), "ratio": round(ours_tps / peer_tps, 3),
                    "llamacpp_tps_all": peer["samples_ts"],
                    "llamacpp_tok_per_cpu_s": round(peer_tokens / max(r["peer_cpu_s"] - ovh[r["model"]]["peer_cpu_s"], 1e-3), 2),
                    "llamacpp_build": peer.get("build_commit"), "llamacpp_cpu_info": peer.get("cpu_info")})
        row["cpu_ratio"] = round(row["ours_tok_per_cpu_s"] / row["llamacpp_tok_per_cpu_s"], 3)
    if ph == "tg":  # decode reads every weight once per token; prefill is compute-bound and reuses them
        for who in ("ours", "llamacpp"):
            row[who + "_weight_gbps"] = round(o["weight_bytes"] * row[who + "_tps"] / 1e9, 3) if row[who + "_tps"] else None
        row["bw_model_size_gbps"] = bw_model[(r["model"], t)]
        row["bw_dram_gbps"] = bw_dram[t]
        row["ours_frac_bw"] = round(row["ours_weight_gbps"] / row["bw_model_size_gbps"], 3)
        row["ours_frac_dram"] = round(row["ours_weight_gbps"] / row["bw_dram_gbps"], 3)
    rows.append(row)

def git(*a):
    try:
        return subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""

SIMD = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
        "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"]
cpu_flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
meta = {
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "commit": git("rev-parse", "--short", "HEAD"),
    "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
    "simd_flags": [f for f in SIMD if f in cpu_flags],
    "command": os.environ.get("BENCH_CMD", ""),
    "cores": os.cpu_count(), "load_average_end": open("/proc/loadavg").read().split()[:3], "reps": reps,
    "bw_dram_read_gbps": bw_dram, "bw_model_size_read_gbps": {f"{os.path.basename(k[0])}/t{k[1]}": v for k, v in bw_model.items()},
    "method": "bench/bench_cpu.sh: each (model, threads, phase) runs as its own process for assay (bench_cpu) and "
              "llama-bench back to back; tok/s = median of reps; tok/CPU-s = tokens run incl. warm-up / (user+sys "
              "CPU seconds minus the CPU seconds of the same tool's one-token run of that model: load and start-up)",
    "startup_cpu_s": {os.path.basename(k): {"assay": v["ours_cpu_s"], "llamacpp": v["peer_cpu_s"]} for k, v in ovh.items()},
}
hdr = ["model", "thr", "phase", "assay tok/s", "llama.cpp tok/s", "ratio", "assay GB/s", "frac of bw (model-size / DRAM)",
       "assay tok/CPU-s", "llama.cpp tok/CPU-s", "CPU ratio"]
lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
for w in rows:
    gb = f"{w['ours_weight_gbps']:.2f}" if w["phase"] == "tg" else "-"
    fr = f"{w['ours_frac_bw']:.2f} / {w['ours_frac_dram']:.2f}" if w["phase"] == "tg" else "-"
    f = lambda v, d: "-" if v is None else f"{v:.{d}f}"
    peer_tps = f(w["llamacpp_tps"], 2) if w["llamacpp_tps"] is not None else f"failed: {w['llamacpp_failure']}"
    lines.append(f"| {w['model']} | {w['threads']} | {w['phase']}{w['n_tokens']} | {w['ours_tps']:.2f} | "
                 f"{peer_tps} | {f(w['ratio'], 2)} | {gb} | {fr} | {w['ours_tok_per_cpu_s']:.1f} | "
                 f"{f(w['llamacpp_tok_per_cpu_s'], 1)} | {f(w['cpu_ratio'], 2)} |")
bwl = "read bandwidth (GB/s, bench_cpu bw): DRAM (1 GiB) " + ", ".join(f"t{k}: {v:.2f}" for k, v in bw_dram.items()) + \
      "; model-sized buffer " + ", ".join(f"{k}: {v:.2f}" for k, v in meta["bw_model_size_read_gbps"].items())
table = "\n".join(lines)
print(table)
print(bwl)
machine = f"{meta['cpu']} [{' '.join(meta['simd_flags'])}], {meta['cores']} cores"
# one entry per machine in the JSON
try:
    runs = json.load(open(out + ".json"))
    runs = runs.get("machines", {}) if isinstance(runs, dict) else {}
except (OSError, ValueError):
    runs = {}
runs[machine] = {"meta": meta, "rows": rows}
with open(out + ".json", "w") as f:
    json.dump({"machines": runs}, f, indent=1)
# one section per machine in the Markdown, the text before the first section kept
head, sections = "# CPU speed: assay vs llama.cpp\n\n", {}
try:
    text = open(out + ".md").read()
    parts = text.split("\n## Machine: ")
    head = parts[0] if parts[0].strip() else head
    for p in parts[1:]:
        sections[p.split("\n", 1)[0].strip()] = "## Machine: " + p.rstrip() + "\n"
except OSError:
    pass
bw_line = ", ".join(f"{k} thread(s) {v:.1f}" for k, v in bw_dram.items())
sections[machine] = (
    f"## Machine: {machine}\n\n"
    f"Run {meta['date_utc']}, assay commit {meta['commit']}, kernels {sorted(set(w['kernels'] for w in rows))}; "
    f"llama.cpp build {sorted(set(str(w.get('llamacpp_build')) for w in rows))}; "
    f"DRAM read bandwidth (1 GiB, GB/s): {bw_line}; load average at the end {' '.join(meta['load_average_end'])} "
    f"(a shared machine: wall-clock tok/s depends on other jobs; the tok/CPU-s columns less so).\n\n"
    + (f"Command: `{meta['command']}`\n\n" if meta["command"] else "")
    + f"{table}\n\n{bwl}\n\nMethod: {meta['method']}.\n")
with open(out + ".md", "w") as f:
    f.write(head.rstrip() + "\n\n" + "\n".join(sections[k] for k in sections))
print(f"wrote {out}.json and {out}.md")
EOF
