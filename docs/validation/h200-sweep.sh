#!/usr/bin/env bash
# A real memory-fit sweep with proxy-torch on the lent H200 (device tool), ending in a measured
# recommendation. Run from the repository root:
#   B=bin/primus-tune OUT=$OUT bash docs/validation/h200-sweep.sh
# The 8-layer Llama-3-8B shape at sequence 4096 and global batch 8 (every micro batch size does
# the same work per step; the same shape as h200-memfit-grid.sh). The database and trial folders come back in a tarball for `report`.
set -u
B=${B:-target/release/primus-tune}
OUT=${OUT:-/tmp/pt-sweep}
mkdir -p "$OUT"
SPACE=${SPACE:-docs/validation/spaces/memory-fit-h200.yaml}
BUDGET=${BUDGET:-7}
export PATH=/usr/local/nvidia/bin:$PATH
WORK=$(mktemp -d)
cp -r presets/examples "$WORK/ex"
EXP="$WORK/ex/experiments/llama3_8B-BF16-pretrain.yaml"
SMALL=(--set num_layers=8 --set seq_length=4096 --set max_position_embeddings=4096 --set global_batch_size=8)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

echo "== sweep"
# Written to $OUT as it goes (a command cut by the time limit still returns what it printed).
timeout -s TERM "${SWEEP_LIMIT:-330}" "$B" sweep "$EXP" "${SMALL[@]}" --space "$SPACE" --name h200-memfit \
    --profile proxy-torch --first-iters 8 --max-iters 24 --budget-minutes "$BUDGET" > "$OUT/sweep.txt" 2>&1
echo "exit $?" >> "$OUT/sweep.txt"
cat "$OUT/sweep.txt"

echo "== recommend from the study"
"$B" recommend "$EXP" "${SMALL[@]}" --study h200-memfit --gpu H200 2>&1 | tee "$OUT/recommend.txt"
"$B" recommend "$EXP" "${SMALL[@]}" --study h200-memfit --json > "$OUT/recommend.json" 2>&1
"$B" trials --config "$EXP" | tee "$OUT/trials.txt"

cp "$WORK/ex/experiments/.primus-tune/trials.db" "$OUT/trials.db"
tar -C "$WORK/ex/experiments/.primus-tune" -czf "$OUT/trial_dirs.tar.gz" trials
echo done
