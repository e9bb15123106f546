#!/usr/bin/env bash
# Issue 14 on the lent H200 (device tool): upstream Megatron-LM under torchrun, launched through
# primus-tune's trial supervisor. A trial, an out-of-memory trial, Ctrl-C and SIGKILL of
# primus-tune mid-trial: the process tree during the trial (torchrun's workers are in sessions of
# their own), the per-process GPU memory attributed to the trial, and what is left afterwards.
# Run from the repository root with a release build in bin/ and the Megatron-LM tree in
# bin/megatron:
#   PROFILE=megatron-local B=bin/primus-tune OUT=$OUT bash docs/validation/h200-launch.sh
# PART=args only dumps Megatron-LM's arguments (presets/megatron-lm-args.tsv); PART=trials only
# runs the trials.
set -u
B=${B:-bin/primus-tune}
FINAL=${OUT:-/tmp/pt-launch}
PROFILE=${PROFILE:-megatron-local}
OUT=$(mktemp -d)/launch
mkdir -p "$OUT" "$FINAL"
export PATH=/usr/local/nvidia/bin:$PATH
export MEGATRON_PATH=${MEGATRON_PATH:-$PWD/bin/megatron}
WORK=$(mktemp -d)
export XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data
mkdir -p "$XDG_CONFIG_HOME/primus-tune/profiles"
cp docs/validation/profiles/*.yaml "$XDG_CONFIG_HOME/primus-tune/profiles/"
cp -r presets/examples "$WORK/ex"
EXP="$WORK/ex/experiments/llama3_8B-BF16-pretrain.yaml"
export PRIMUS_TUNE_WORKSPACE=$WORK/ws
# The bundled Llama 3 8B experiment scaled to 4 layers of width 2048 (the rest of its shape — GQA,
# SwiGLU, RMSNorm, RoPE, untied embeddings, no linear biases — as the experiment has it) at
# sequence 2048: fits one H200. The out-of-memory trial runs the experiment as it is (8B,
# sequence 8192), which does not fit one GPU.
SMALL=(--set num_layers=4 --set hidden_size=2048 --set ffn_hidden_size=8192 --set num_attention_heads=16
       --set num_query_groups=4 --set seq_length=2048 --set max_position_embeddings=2048
       --set global_batch_size=16 --set micro_batch_size=4)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

# The tree of every process of trial $1, with its session and group, and NVML's view.
snapshot() {
  echo "-- processes carrying PRIMUS_TUNE_TRIAL_ID=$1 (pid ppid pgid sid comm)"
  for p in /proc/[0-9]*; do
    if { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "PRIMUS_TUNE_TRIAL_ID=$1"; then
      ps -o pid=,ppid=,pgid=,sid=,comm= -p "${p#/proc/}"
    fi
  done
  echo "-- nvidia-smi compute apps"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
}

# Processes of trial $1 still alive.
left() {
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "PRIMUS_TUNE_TRIAL_ID=$1" && echo "${p#/proc/}"
  done | tr '\n' ' '
}

# trial NAME ID STOP: run trial ID (its id in the workspace) with the extra flags in ARGS; STOP is
# none, int (Ctrl-C to primus-tune's group) or kill (SIGKILL of primus-tune) once iterations flow.
trial() {
  local name=$1 id=$2 stop=$3
  echo "== $name (trial $id, stop: $stop) launched at $(date +%s.%N)" | tee -a "$OUT/times.txt"
  echo "\$ $B run \$EXP --profile $PROFILE ${ARGS[*]} --json" >> "$OUT/commands.txt"
  setsid "$B" run "$EXP" --profile "$PROFILE" "${ARGS[@]}" --json \
      > "$OUT/$name.json" 2> "$OUT/$name.err" &
  local pt=$!
  local t=0
  until grep -q '"event":"iteration"' "$OUT/$name.json" 2>/dev/null || [ $t -ge 240 ] || ! kill -0 $pt 2>/dev/null; do
    sleep 1; t=$((t+1))
  done
  sleep 3
  snapshot "$id" > "$OUT/$name.tree.txt"
  case $stop in
    int) kill -INT -- -$pt ;;
    kill) kill -KILL $pt ;;
  esac
  wait $pt; local rc=$?
  echo "exit $rc at $(date +%s.%N)" | tee -a "$OUT/times.txt"
  sleep 15
  echo "left 15 s after the end: [$(left "$id")]" | tee -a "$OUT/times.txt" "$OUT/$name.tree.txt"
  tail -c 1500 "$OUT/$name.json"; echo
}

if [ "${PART:-all}" = args ] || [ "${PART:-all}" = all ]; then
  python3 docs/validation/megatron-args.py > "$OUT/megatron-lm-args.tsv" 2> "$OUT/megatron-args.err"
  echo "megatron args: $(wc -l < "$OUT/megatron-lm-args.tsv") lines"; tail -3 "$OUT/megatron-args.err"
fi
if [ "${PART:-all}" = trials ] || [ "${PART:-all}" = all ]; then
  ARGS=("${SMALL[@]}" --max-iters 30 --ci-target 0 --grace-seconds 5)
  trial trial 1 none
  ARGS=(--max-iters 30 --ci-target 0 --grace-seconds 5)
  trial oom 2 none
  ARGS=("${SMALL[@]}" --max-iters 200 --ci-target 0 --grace-seconds 5)
  trial ctrl-c 3 int
  trial sigkill 4 kill
  "$B" trials --config "$EXP" 2>&1 | tee "$OUT/trials.txt"
  for i in 1 2 3 4; do
    "$B" trials --config "$EXP" show $i --json > "$OUT/show$i.json" 2>&1
    cp "$WORK/ws/trials/$i/argv.json" "$OUT/argv$i.json" 2>/dev/null
    tail -c 3000 "$WORK/ws/trials/$i/stderr.log" > "$OUT/stderr$i.tail.log" 2>/dev/null
  done
fi
# The device tool returns few files: one archive.
tar -czf "$FINAL/launch.tgz" -C "$OUT" .
