#!/usr/bin/env bash
# Two H200s of one host (device kind nvidia-h200-x2): upstream Megatron-LM across two ranks,
# launched through primus-tune. Every earlier validation ran one GPU. Here: what the tool detects,
# a world of two taken from a user profile's env (GPUS_PER_NODE: "2", no --gpus), data-parallel
# and tensor-parallel trials, a launch the lint refuses at that world, the same shape on one GPU
# for comparison, and Ctrl-C of a two-rank trial (no rank may outlive it).
# From the repository root, with the stripped release binary and the Megatron-LM tree carried in
# bin/ (never committed):
#   OUT=$OUT bash docs/validation/h200-x2.sh
set -u
FINAL=${OUT:-/tmp/pt-x2}
# The device tool returns few files: everything goes into one archive, beside console.txt.
OUT=$(mktemp -d)/x2
mkdir -p "$OUT" "$FINAL"
export PATH=/usr/local/nvidia/bin:$PATH
G=$(mktemp -d)
cp bin/primus-tune "$G/primus-tune"
B=$G/primus-tune
export MEGATRON_PATH=$PWD/bin/megatron
W=$G/work
mkdir -p "$W/config/primus-tune/profiles"
cp -r presets/examples "$W/ex"
export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data XDG_STATE_HOME=$W/state PRIMUS_TUNE_WORKSPACE=$W/ws
unset GPUS_PER_NODE NNODES
# A user profile: the built-in megatron-local whose env names the world (two GPUs on this node).
sed -e 's/^name: megatron-local/name: megatron-x2/' presets/profiles/megatron-local.yaml > "$W/config/primus-tune/profiles/megatron-x2.yaml"
printf '  GPUS_PER_NODE: "2"\n' >> "$W/config/primus-tune/profiles/megatron-x2.yaml"
cp "$W/config/primus-tune/profiles/megatron-x2.yaml" "$OUT/megatron-x2.yaml"
EXP=$W/ex/experiments/llama3_8B-BF16-pretrain.yaml
# The dense GPT shape of h200-grids.sh: 12 layers x 1536, sequence 2048, global batch 32.
SHAPE=(--set seq_length=2048 --set max_position_embeddings=2048 --set global_batch_size=32
       --set transformer_impl=local --set use_flash_attn=false
       --set num_layers=12 --set hidden_size=1536 --set ffn_hidden_size=6144
       --set num_attention_heads=12 --set num_query_groups=12 --set micro_batch_size=8)
log() { echo "$*" | tee -a "$OUT/console.txt"; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$B" --version >> "$OUT/gpu.txt" 2>&1

# Processes of trial $1 still alive (their environment carries the trial id).
left() {
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "PRIMUS_TUNE_TRIAL_ID=$1" && echo "${p#/proc/}"
  done | tr '\n' ' '
}

# trial NAME PROFILE ARGS...: a trial to its end; its JSON events in NAME.json.
trial() {
  local name=$1 profile=$2; shift 2
  log "\$ primus-tune run \$EXP \${SHAPE[@]} --profile $profile $* --json   # $name"
  local t0=$(date +%s)
  "$B" run "$EXP" "${SHAPE[@]}" --profile "$profile" "$@" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  log "exit $? after $(( $(date +%s) - t0 )) s"
  grep -v '"event":"iteration"\|"event":"telemetry"\|"event":"log"' "$OUT/$name.json" | tail -c 2500 >> "$OUT/console.txt"
  echo >> "$OUT/console.txt"
}

case ${PART:-a} in
a)
  "$B" gpus > "$OUT/gpus.txt" 2>&1; "$B" gpus --json > "$OUT/gpus.json" 2>&1
  cat "$OUT/gpus.txt" >> "$OUT/console.txt"
  # Refused before launch: TP 4 does not divide the profile's world of 2.
  log "\$ primus-tune run \$EXP \${SHAPE[@]} --set tensor_model_parallel_size=4 --profile megatron-x2   # refused"
  "$B" run "$EXP" "${SHAPE[@]}" --set tensor_model_parallel_size=4 --profile megatron-x2 --max-iters 5 > "$OUT/refused.txt" 2>&1
  log "exit $?"; cat "$OUT/refused.txt" >> "$OUT/console.txt"
  trial dp2 megatron-x2 --max-iters 30
  # The experiment sets sequence_parallel: true; Megatron-LM's local implementation without
  # Apex normalises with torch's norm, which asserts against it once TP > 1.
  trial tp2-sp megatron-x2 --set tensor_model_parallel_size=2 --max-iters 30
  ;;
b)
  trial tp2 megatron-x2 --set tensor_model_parallel_size=2 --set sequence_parallel=false --max-iters 30
  trial one-gpu megatron-local --gpus 1 --max-iters 30
  # Ctrl-C of a two-rank trial once iterations flow: both ranks must go with it.
  log "\$ primus-tune run \$EXP \${SHAPE[@]} --profile megatron-x2 --max-iters 300 --ci-target 0 --json, then Ctrl-C"
  setsid "$B" run "$EXP" "${SHAPE[@]}" --profile megatron-x2 --max-iters 300 --ci-target 0 --json > "$OUT/ctrl-c.json" 2> "$OUT/ctrl-c.err" &
  pt=$!
  t=0
  until [ "$(grep -c '"event":"iteration"' "$OUT/ctrl-c.json" 2>/dev/null)" -ge 5 ] || [ $t -ge 200 ] || ! kill -0 $pt 2>/dev/null; do
    sleep 1; t=$((t+1))
  done
  id=$(grep -o '"trial_id":[0-9]*' "$OUT/ctrl-c.json" | head -1 | cut -d: -f2)
  log "trial $id: ranks before Ctrl-C: [$(left "$id")]; compute apps: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ';')"
  kill -INT -- -$pt
  wait $pt
  log "exit $?"
  sleep 10
  log "trial $id: left 10 s after: [$(left "$id")]; compute apps: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')]"
  grep -v '"event":"iteration"\|"event":"telemetry"\|"event":"log"' "$OUT/ctrl-c.json" | tail -c 2000 >> "$OUT/console.txt"
  ;;
c)
  # A sweep at the profile's world of two: micro batch 8/16/32 x recompute. At data-parallel 2
  # the global batch of 32 takes micro batch 8 and 16, not 32 (32 x 2 ranks > 32).
  log "\$ primus-tune sweep \$EXP \${SHAPE[@]} --space docs/validation/spaces/gpt-mbs-recompute-h200.yaml --profile megatron-x2 --name x2"
  t0=$(date +%s)
  timeout -k 15 -s TERM "${LIMIT:-420}" "$B" sweep "$EXP" "${SHAPE[@]}" --space docs/validation/spaces/gpt-mbs-recompute-h200.yaml \
      --profile megatron-x2 --name x2 > "$OUT/sweep.txt" 2>&1
  log "exit $? after $(( $(date +%s) - t0 )) s"
  cat "$OUT/sweep.txt" >> "$OUT/console.txt"
  "$B" studies show x2 --config "$EXP" --log > "$OUT/study.txt" 2>&1
  ;;
esac
"$B" trials --config "$EXP" > "$OUT/trials-${PART:-a}.txt" 2>&1
for i in $(seq 1 6); do
  "$B" trials --config "$EXP" show "$i" --json > "$OUT/show$i.json" 2>/dev/null || rm -f "$OUT/show$i.json"
  [ -f "$W/ws/trials/$i/argv.json" ] && cp "$W/ws/trials/$i/argv.json" "$OUT/argv$i.json"
done
cat "$OUT/trials-${PART:-a}.txt" >> "$OUT/console.txt"
tar -czf "$FINAL/x2-${PART:-a}.tgz" -C "$OUT" . 2>/dev/null
cp "$OUT/console.txt" "$FINAL/console-${PART:-a}.txt"
tail -c 6000 "$OUT/console.txt"
