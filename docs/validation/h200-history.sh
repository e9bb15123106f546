#!/usr/bin/env bash
# Issue 17 on the lent H200 (device tool): the workspace's launch history in a real sweep.
# Upstream Megatron-LM (commit d98e8a64, bin/megatron, never committed) through the built-in
# `megatron-local` profile, the dense GPT shape of h200-grids.sh (12 layers x 1536, sequence 2048,
# global batch 32), space docs/validation/spaces/gpt-mbs-h200.yaml (micro batch 4, 8, 16).
# The same sweep twice, into one workspace, as a user re-running it:
#   PART=a: the first sweep, with no history (study hist-a);
#   PART=b: the same sweep again (study hist-b): its search starts from the launch cost and the
#           launch-to-launch variation the first sweep's trials measured (app/sweep/history.rs).
# Each part is one device call; the workspace lives in /tmp/hist on the device machine between
# the two (a warm machine keeps it). From the repository root, bin/ carried (the release binary
# and the Megatron-LM tree):
#   PART=a OUT=$OUT bash docs/validation/h200-history.sh
#   PART=b OUT=$OUT bash docs/validation/h200-history.sh
# The same for micro batch 8/16/32 x recompute none/selective/full (gpt-mbs-recompute-h200.yaml,
# the current micro batch 8), in a fresh workspace: PART=c (no history), then PART=d (again).
set -u
G=${G:-/tmp/hist}
PART=${PART:-a}
LIMIT=${LIMIT:-540}
export PATH=/usr/local/nvidia/bin:$PATH
case $PART in
  a|b) SPACE=docs/validation/spaces/gpt-mbs-h200.yaml; CUR=4 ;;
  *) SPACE=docs/validation/spaces/gpt-mbs-recompute-h200.yaml; CUR=8 ;;
esac
if [ "$PART" = a ] || [ "$PART" = c ]; then
  rm -rf "$G"; mkdir -p "$G/work"
  cp bin/primus-tune "$G/primus-tune"
  cp -r bin/megatron "$G/megatron"
  cp -r presets/examples "$G/work/ex"
fi
B=$G/primus-tune
export MEGATRON_PATH=$G/megatron
W=$G/work
export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data XDG_STATE_HOME=$W/state PRIMUS_TUNE_WORKSPACE=$W/ws
EXP=$W/ex/experiments/llama3_8B-BF16-pretrain.yaml
SHAPE=(--set seq_length=2048 --set max_position_embeddings=2048 --set global_batch_size=32
       --set transformer_impl=local --set use_flash_attn=false
       --set num_layers=12 --set hidden_size=1536 --set ffn_hidden_size=6144
       --set num_attention_heads=12 --set num_query_groups=12 --set micro_batch_size=$CUR)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu-$PART.txt"
"$B" --version >> "$OUT/gpu-$PART.txt" 2>&1
args=(sweep "$EXP" "${SHAPE[@]}" --space "$SPACE" --profile "${PROFILE:-megatron-local}" --gpus 1 --name "hist-$PART" ${EXTRA:-})
echo "\$ primus-tune ${args[*]}" > "$OUT/sweep-$PART.txt"
t0=$(date +%s)
timeout -k 15 -s TERM "$LIMIT" "$B" "${args[@]}" >> "$OUT/sweep-$PART.txt" 2>&1
echo "exit $? after $(( $(date +%s) - t0 )) s" >> "$OUT/sweep-$PART.txt"
"$B" trials --all --workspace "$W/ws" > "$OUT/trials-$PART.txt" 2>&1
"$B" trials --all --workspace "$W/ws" --json > "$OUT/trials-$PART.json" 2>&1
python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
  "$(find "$W/ws" -name '*.db' | head -1)" "$OUT/trials-$PART.db" 2>> "$OUT/sweep-$PART.txt"
cat "$OUT/sweep-$PART.txt"
