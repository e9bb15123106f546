#!/usr/bin/env bash
# Issue 40 on the lent H200 (device tool): an out-of-memory trial of upstream Megatron-LM under
# the shipped `megatron-local` profile ends within 5 s of its OOM line, with nothing of it left
# on the GPU; and a CPU stand-in's trial on the same machine records the host, never the GPU, as
# its telemetry. Run from the repository root with a release build in bin/ and the Megatron-LM
# tree (d98e8a64) in bin/megatron:
#   B=bin/primus-tune OUT=$OUT bash docs/validation/h200-oom-stop.sh
set -u
B=${B:-bin/primus-tune}
OUT=${OUT:-/tmp/pt-oom}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
export PATH=/usr/local/nvidia/bin:$PATH
export MEGATRON_PATH=${MEGATRON_PATH:-$PWD/bin/megatron}
WORK=$(mktemp -d)
export XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data PRIMUS_TUNE_WORKSPACE=$WORK/ws
cp -r presets/examples "$WORK/ex"
# The bundled Llama 3 8B experiment as it is (8B, sequence 8192): it does not fit one H200.
EXP="$WORK/ex/experiments/llama3_8B-BF16-pretrain.yaml"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$B" --version | tee -a "$OUT/gpu.txt"

# Processes of trial $1 still alive.
left() {
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "PRIMUS_TUNE_TRIAL_ID=$1" && echo "${p#/proc/}"
  done | tr '\n' ' '
}

for i in $(seq 1 "$RUNS"); do
  echo "\$ $B run \$EXP --profile megatron-local --max-iters 10 --json" >> "$OUT/commands.txt"
  # Every line of the JSON stream stamped (Unix seconds) as it arrives.
  "$B" run "$EXP" --profile megatron-local --max-iters 10 --json 2> "$OUT/oom$i.err" |
    while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done > "$OUT/oom$i.stamped"
  ended=$(date +%s.%N)
  gpu_now=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' ')
  sleep 2
  gpu_2s=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' ')
  # The JSON stream does not echo log lines: the tool says "stopping" (reason failure) as it
  # reads the OOM line, which trial-ended's failure quotes.
  oom=$(grep -m1 '"event":"stopping"' "$OUT/oom$i.stamped" | cut -d' ' -f1)
  done_at=$(grep -m1 '"event":"trial-ended"' "$OUT/oom$i.stamped" | cut -d' ' -f1)
  class=$(grep -m1 '"event":"trial-ended"' "$OUT/oom$i.stamped" | grep -o '"class":"[a-z-]*"')
  {
    echo "run $i: OOM line read (stopping) at $oom, trial-ended at $done_at, command exited at $ended ($class)"
    python3 -c "print('  OOM line read -> trial ended: %.2f s' % ($done_at - $oom))"
    echo "  GPU compute apps at the end: [$gpu_now]; 2 s later: [$gpu_2s]"
    echo "  processes of trial $i left: [$(left "$i")]"
  } | tee -a "$OUT/oom-times.txt"
done

# A CPU stand-in on this GPU machine: its trial samples the host only.
echo "\$ $B run \$EXP --profile proxy-cpu --max-iters 20 --json (tiny shape)" >> "$OUT/commands.txt"
"$B" run "$EXP" --profile proxy-cpu --max-iters 20 --json \
  --set num_layers=2 --set hidden_size=512 --set ffn_hidden_size=1024 --set num_attention_heads=8 \
  --set num_query_groups=2 --set seq_length=256 --set max_position_embeddings=256 \
  --set micro_batch_size=1 --set global_batch_size=8 > "$OUT/proxy.json" 2> "$OUT/proxy.err"
id=$(( RUNS + 1 ))
"$B" trials show "$id" > "$OUT/proxy.show.txt" 2>&1
"$B" trials show "$id" --json > "$OUT/proxy.show.json" 2>&1
"$B" trials > "$OUT/trials.txt" 2>&1
cat "$OUT/proxy.show.txt"
tail -n 1 "$OUT/proxy.json" | python3 -c "import json,sys; v=json.load(sys.stdin); print('proxy basis', v.get('basis'), '| GPU telemetry entries', len(v.get('telemetry', [])), '| peak', v.get('peak_mem_gib'))" | tee -a "$OUT/oom-times.txt"
tar -czf "$OUT/oom-stop.tgz" -C "$OUT" --exclude oom-stop.tgz .
