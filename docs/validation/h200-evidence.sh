#!/usr/bin/env bash
# Issue 13 on the lent H200 (device tool): what a performance engineer sees of upstream
# Megatron-LM trials — the start-up reported apart from the GPU figures, peak memory with its
# source, trials compared by what they ran, the world detected (1 GPU), Primus-on-AMD advice
# "does not apply", and (PART=sweep) a sweep whose baseline is measured first and whose illegal
# candidate (micro batch 32 with global batch 16) is dropped before launch. Run from the
# repository root, with a release build in bin/ and the Megatron-LM tree in bin/megatron:
#   PART=trials B=bin/primus-tune OUT=$OUT bash docs/validation/h200-evidence.sh
#   PART=sweep  B=bin/primus-tune OUT=$OUT bash docs/validation/h200-evidence.sh
set -u
B=${B:-bin/primus-tune}
FINAL=${OUT:-/tmp/pt-evidence}
PART=${PART:-trials}
# Everything goes to one folder packed at the end (the device tool returns few files).
OUT=$(mktemp -d)/$PART
mkdir -p "$OUT" "$FINAL"
export PATH=/usr/local/nvidia/bin:$PATH
export MEGATRON_PATH=${MEGATRON_PATH:-$PWD/bin/megatron}
WORK=$(mktemp -d)
export XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data
mkdir -p "$XDG_CONFIG_HOME/primus-tune/profiles"
cp docs/validation/profiles/megatron-h200.yaml "$XDG_CONFIG_HOME/primus-tune/profiles/"
cp -r presets/examples "$WORK/ex"
EXP="$WORK/ex/experiments/llama3_8B-BF16-pretrain.yaml"
export PRIMUS_TUNE_WORKSPACE=$WORK/ws
# A 4-layer, 2048-wide model at sequence 2048, global batch 16: fits one H200 at every micro
# batch. The megatron profiles pass Megatron the experiment's overrides, so the whole shape is
# given here (Megatron requires the hidden size and the heads).
SHAPE=(--set num_layers=4 --set hidden_size=2048 --set num_attention_heads=16 --set ffn_hidden_size=8192
       --set seq_length=2048 --set max_position_embeddings=2048 --set global_batch_size=16
       --set bf16=true --set lr=1.0e-4)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

if [ "$PART" = trials ]; then
  echo "== lint: the world is what NVML detects"
  "$B" lint "$EXP" "${SHAPE[@]}" --set micro_batch_size=32 2>&1 | tee "$OUT/lint.txt"
  "$B" lint "$EXP" "${SHAPE[@]}" --json > "$OUT/lint.json" 2>&1
  echo "== recommend for upstream Megatron-LM on this GPU"
  "$B" recommend "$EXP" "${SHAPE[@]}" --profile megatron-h200 2>&1 | tee "$OUT/recommend.txt"
  "$B" recommend "$EXP" "${SHAPE[@]}" --profile megatron-h200 --json > "$OUT/recommend.json" 2>&1
  echo "== monitor beside the trials (raw samples, 2 Hz)"
  "$B" monitor --json --interval 500 --duration 200 > "$OUT/monitor.jsonl" 2>/dev/null &
  MON=$!
  for MBS in 1 4; do
    echo "== trial micro_batch_size=$MBS (launched at $(date +%s.%N))" | tee -a "$OUT/times.txt"
    "$B" run "$EXP" --profile megatron-h200 "${SHAPE[@]}" --set micro_batch_size=$MBS --max-iters 30 \
        --ci-target 0 --json > "$OUT/trial_mbs$MBS.json" 2> "$OUT/trial_mbs$MBS.err"
    echo "exit $? at $(date +%s.%N)" | tee -a "$OUT/times.txt"
    tail -c 1200 "$OUT/trial_mbs$MBS.json"; echo
  done
  kill -TERM $MON 2>/dev/null; wait $MON 2>/dev/null
  "$B" trials --config "$EXP" 2>&1 | tee "$OUT/trials.txt"
  for i in 1 2; do "$B" trials --config "$EXP" show $i --json > "$OUT/trial$i.json" 2>&1; done
  "$B" trials --config "$EXP" show 2 2>&1 | tee "$OUT/trial2.txt"
  "$B" trials --config "$EXP" compare 1 2 2>&1 | tee "$OUT/compare.txt"
  "$B" trials --config "$EXP" compare 1 2 --json > "$OUT/compare.json" 2>&1
  tail -c 4000 "$WORK"/ws/trials/1/stdout.log > "$OUT/trial1_stdout_tail.log" 2>/dev/null
  echo "== GPU utilisation: the whole trial (monitor beside it) against the trial's summary"
  python3 - "$OUT" <<'PY' | tee "$OUT/util.txt"
import json, sys
out = sys.argv[1]
samples = [json.loads(l) for l in open(f"{out}/monitor.jsonl") if l.strip()]
spans = []
for line in open(f"{out}/times.txt"):
    w = line.split()
    if w[0] == "==":
        start = float(w[-1].rstrip(")"))
    elif w[0] == "exit":
        spans.append((start, float(w[-1])))
for i, (a, b) in enumerate(spans, 1):
    u = [s["util_pct"] for s in samples if a <= s["ts"] <= b and s.get("util_pct") is not None]
    t = json.load(open(f"{out}/trial{i}.json"))
    summ = t.get("summary") or {}
    g = (summ.get("telemetry") or [{}])[0]
    print(f"trial {i}: whole trial (launch to exit, {len(u)} samples) util mean "
          f"{sum(u) / max(len(u), 1):.1f} %; summary ({summ.get('telemetry_span')}, "
          f"{g.get('samples')} samples) util mean {g.get('util_mean_pct')} %; "
          f"start-up {summ.get('startup_s')} s")
PY
fi

if [ "$PART" = sweep ]; then
  printf 'name: mbs-h200\ndescription: micro batch, one illegal\nknobs:\n  - flag: micro_batch_size\n    values: [2, 4, 32]\n    memory: increasing\n' > "$WORK/mbs.yaml"
  echo "== sweep: current micro batch 1 is candidate 0; 32 cannot split global batch 16"
  timeout -s TERM "${SWEEP_LIMIT:-540}" "$B" sweep "$EXP" "${SHAPE[@]}" --set micro_batch_size=1 \
      --space "$WORK/mbs.yaml" --name mbs-h200 --profile megatron-h200 --first-iters 12 --max-iters 24 \
      --budget-minutes 8 > "$OUT/sweep.txt" 2>&1
  echo "exit $?" >> "$OUT/sweep.txt"
  cat "$OUT/sweep.txt"
  "$B" studies show mbs-h200 --config "$EXP" --json > "$OUT/study.json" 2>&1
  "$B" recommend "$EXP" "${SHAPE[@]}" --study mbs-h200 --profile megatron-h200 2>&1 | tee "$OUT/recommend.txt"
  "$B" trials --config "$EXP" 2>&1 | tee "$OUT/trials.txt"
fi
cp "$WORK/ws/trials.db" "$OUT/trials.db" 2>/dev/null
tar -C "$(dirname "$OUT")" -czf "$FINAL/evidence-$PART.tar.gz" "$PART"
echo done
