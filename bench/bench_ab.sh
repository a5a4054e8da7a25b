#!/usr/bin/env bash
# bench_ab.sh — `assay bench` of two builds of assay side by side (a change against the commit before it), on the
# same model, alternating A and B so that a shared machine's load hits both alike; plus instruction counts under
# callgrind, which do not depend on the load at all.
#
#   bench/bench_ab.sh A_BIN B_BIN [MODEL]          (MODEL default: ../shared/models/house)
#   env: ROUNDS=5 (alternations; 0: instructions only)  BATCH=1,4  PROMPT=256  GEN=32  THREADS=2  CALLGRIND=1 (0: skip)
#
# Wall clock: each round runs `assay bench --batch $BATCH --reps 3` for A, then for B; the table gives, per batch
# size, the median over rounds of each build's median prompt and generation tok/s and the ratio B/A.
# Instructions: `valgrind --tool=callgrind` (one thread, AVX2 kernels: valgrind has no AVX-512) counts the whole
# process for GEN and for 4 x GEN generated tokens; the difference over the extra tokens is the instructions per
# generated token (decode steps of batch 1 and 4 together), prompt and load cancelling out.
set -euo pipefail
A=${1:?usage: bench_ab.sh A_BIN B_BIN [MODEL]}
B=${2:?usage: bench_ab.sh A_BIN B_BIN [MODEL]}
SRC=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${3:-$SRC/../shared/models/house}
ROUNDS=${ROUNDS:-5}
BATCH=${BATCH:-1,4}
PROMPT=${PROMPT:-256}
GEN=${GEN:-32}
THREADS=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$ROUNDS" -gt 0 ]; then
for r in $(seq 1 "$ROUNDS"); do
    for side in A B; do
        bin=$A; [ "$side" = B ] && bin=$B
        "$bin" bench "$MODEL" --batch "$BATCH" --prompt "$PROMPT" --gen "$GEN" --reps 3 --threads "$THREADS" --json \
            > "$tmp/$side.$r.json" 2>/dev/null
    done
done

python3 - "$tmp" "$ROUNDS" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
runs = {s: [json.load(open(f"{tmp}/{s}.{r}.json"))["bench"] for r in range(1, rounds + 1)] for s in "AB"}
print(f"wall clock, median of {rounds} alternated rounds (each round: median of 3 repeats)")
print("| batch | A prompt tok/s | B prompt tok/s | B/A | A generation tok/s | B generation tok/s | B/A |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for i, p in enumerate(runs["A"][0]["points"]):
    med = {s: [statistics.median(r["points"][i][k] for r in runs[s]) for k in ("prefill_tps", "decode_tps")] for s in "AB"}
    print(f"| {p['batch']} | {med['A'][0]:.1f} | {med['B'][0]:.1f} | {med['B'][0] / med['A'][0]:.3f} | "
          f"{med['A'][1]:.1f} | {med['B'][1]:.1f} | {med['B'][1] / med['A'][1]:.3f} |")
PY
fi

if [ "${CALLGRIND:-1}" = 1 ] && command -v valgrind >/dev/null; then
    echo
    echo "instructions (callgrind, 1 thread, --batch $BATCH --prompt 64): per generated token = (count at gen $((4 * GEN)) - count at gen $GEN) / extra tokens"
    nb=$(python3 -c "print(sum(int(b) for b in '$BATCH'.split(',')))")
    extra=$(( 3 * GEN * nb ))
    for side in A B; do
        bin=$A; [ "$side" = B ] && bin=$B
        for g in "$GEN" $((4 * GEN)); do
            valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$side.$g" "$bin" bench "$MODEL" --batch "$BATCH" \
                --prompt 64 --gen "$g" --reps 1 --threads 1 > /dev/null 2> "$tmp/cg.$side.$g.log"
        done
        lo=$(grep -o 'Collected : [0-9]*' "$tmp/cg.$side.$GEN.log" | grep -o '[0-9]*$')
        hi=$(grep -o 'Collected : [0-9]*' "$tmp/cg.$side.$((4 * GEN)).log" | grep -o '[0-9]*$')
        echo "$side: $lo at gen $GEN, $hi at gen $((4 * GEN)): $(( (hi - lo) / extra )) instructions per generated token"
    done
fi
