#!/usr/bin/env bash
# Train N seeds of the paper preset at once on one CUDA GPU, one `assign-add train` process per seed,
# at the authors' protocol (40,000 steps, bf16 autocast); prints the wall time and seeds/minute.
#
#   scripts/gpu_seeds.sh OUT N FIRST_SEED [key=value ...]      e.g. scripts/gpu_seeds.sh runs/gpu 16 42
#
# Each seed is an ordinary run directory OUT/seed-S; a killed seed continues with
# `assign-add train --out OUT/seed-S --config OUT/seed-S/config.toml --resume`.  One CPU thread per
# process: the model is small, so each process is bound by kernel launches, and N processes share
# the GPU.  Set ASSIGN_ADD=... to another launcher (default: python3 -m assign_add.cli).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 OUT N FIRST_SEED [key=value ...]" >&2
  exit 2
fi
out=$1; n=$2; first=$3; shift 3
launcher=${ASSIGN_ADD:-python3 -m assign_add.cli}
mkdir -p "$out"
start=$(date +%s.%N)
pids=()
for i in $(seq 0 $((n - 1))); do
  seed=$((first + i))
  $launcher train --out "$out/seed-$seed" --no-progress train.seed=$seed train.device=cuda \
    train.precision=bf16 train.threads=1 "$@" >"$out/seed-$seed.log" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
end=$(date +%s.%N)
python3 - "$n" "$failed" "$start" "$end" <<'PY'
import sys
n, failed, start, end = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
minutes = (end - start) / 60
print(f"{n - failed} of {n} seeds finished in {minutes:.2f} min: {(n - failed) / minutes:.2f} seeds/minute")
PY
[ "$failed" -eq 0 ]
