#!/usr/bin/env bash
# seeds_fuzz_config.sh CORPUS — config.json files for fuzz_config: the house model's and the families we read.
set -u
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${ASSAY_SHARED:-$root/../shared}
[ -f "$shared/models/house/config.json" ] && cp "$shared/models/house/config.json" "$out/house.json"
