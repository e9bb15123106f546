#!/usr/bin/env bash
# The memory-fit space's grid on the lent H200 (device tool): every candidate of
# docs/validation/spaces/memory-fit-h200.yaml run once with proxy-torch for a fixed number of
# iterations, no early stop, into its own database. `replay_table.py` turns it into the replay
# benchmark's table (tests/fixtures/replay/h200-memory-fit.json). Run from the repository root:
#   B=bin/primus-tune OUT=$OUT bash docs/validation/h200-memfit-grid.sh
set -u
B=${B:-target/release/primus-tune}
OUT=${OUT:-/tmp/pt-grid}
ITERS=${ITERS:-20}
mkdir -p "$OUT"
export PATH=/usr/local/nvidia/bin:$PATH
WORK=$(mktemp -d)
cp -r presets/examples "$WORK/ex"
EXP="$WORK/ex/experiments/llama3_8B-BF16-pretrain.yaml"
SHAPE=(--set num_layers=8 --set seq_length=4096 --set max_position_embeddings=4096 --set global_batch_size=8)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
for mbs in 1 2 4 8; do
  for rc in none full; do
    RC=()
    if [ "$rc" = full ]; then
      RC=(--set recompute_granularity=full --set recompute_method=uniform --set recompute_num_layers=1)
    fi
    echo "== micro_batch_size=$mbs recompute=$rc" | tee -a "$OUT/grid.txt"
    timeout -s TERM "${RUN_LIMIT:-100}" "$B" run "$EXP" "${SHAPE[@]}" --set micro_batch_size=$mbs "${RC[@]}" \
        --profile proxy-torch --max-iters "$ITERS" --ci-target 0 --db "$OUT/grid.db" >> "$OUT/grid.txt" 2>&1
    echo "exit $?" >> "$OUT/grid.txt"
  done
done
cat "$OUT/grid.txt"
echo done
