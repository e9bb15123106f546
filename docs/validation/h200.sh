#!/usr/bin/env bash
# Validation on the lent NVIDIA H200 (device tool). Run from the repository root:
#   B=bin/primus-tune OUT=$OUT bash docs/validation/h200.sh
# B is a release build of primus-tune made on the development machine and carried over.
# Everything it writes goes under $OUT.
set -u
B=${B:-target/release/primus-tune}
FINAL=${OUT:-/tmp/pt-validation}
# Everything goes to one folder that is packed at the end (the device tool returns few files).
OUT=$(mktemp -d)/h200
mkdir -p "$OUT"
export PATH=/usr/local/nvidia/bin:$PATH

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/nvidia-smi.csv"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' 2>&1 | tee "$OUT/torch.txt"

echo "== gpus"
"$B" gpus | tee "$OUT/gpus.txt"
"$B" gpus --json > "$OUT/gpus.json"

# A private copy of the bundled example; a 4-layer Llama-3-8B shape fits one GPU with AdamW.
cp -r presets/examples "$OUT/ex"
EXP="$OUT/ex/experiments/llama3_8B-BF16-pretrain.yaml"
SMALL=(--set num_layers=4 --set seq_length=4096 --set max_position_embeddings=4096 --set global_batch_size=64)

echo "== monitor during trials (JSON Lines, 2 Hz)"
"$B" monitor --json --interval 500 --duration 120 > "$OUT/monitor.jsonl" &
MON=$!
sleep 2
for MBS in 1 4; do
  echo "== trial proxy-torch micro_batch_size=$MBS"
  "$B" run "$EXP" --profile proxy-torch "${SMALL[@]}" --set micro_batch_size=$MBS --max-iters 25 \
      --json > "$OUT/trial_mbs$MBS.json" 2> "$OUT/trial_mbs$MBS.err"
  echo "exit $?"; head -c 1500 "$OUT/trial_mbs$MBS.json"; echo
done
echo "== trial that runs out of GPU memory (micro_batch_size=512)"
"$B" run "$EXP" --profile proxy-torch "${SMALL[@]}" --set micro_batch_size=512 --set global_batch_size=512 \
    --max-iters 10 --json > "$OUT/trial_oom.json" 2> "$OUT/trial_oom.err"
echo "exit $?"; head -c 1500 "$OUT/trial_oom.json"; echo
kill -TERM $MON 2>/dev/null; wait $MON 2>/dev/null

"$B" trials --config "$EXP" | tee "$OUT/trials.txt"
"$B" trials --config "$EXP" --csv > "$OUT/trials.csv"
mkdir -p "$OUT/trial_dirs"
for d in "$OUT"/ex/experiments/.primus-tune/trials/*; do
  n=$(basename "$d"); mkdir -p "$OUT/trial_dirs/$n"
  cp "$d"/argv.json "$d"/env.json "$d"/stdout.log "$OUT/trial_dirs/$n/" 2>/dev/null
  tail -c 20000 "$d"/stderr.log > "$OUT/trial_dirs/$n/stderr.tail.log" 2>/dev/null
done
"$B" trials --config "$EXP" show 1 --json > "$OUT/trial1.json"

echo "== overhead: CPU time and RSS at 2 Hz for 60 s, side by side"
python3 docs/validation/cpu_of.py 60 primus-tune-monitor -- "$B" monitor --json --interval 500 > "$OUT/ovh_monitor.json" &
python3 docs/validation/cpu_of.py 60 nvidia-smi-query -- nvidia-smi \
    --query-gpu=utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm --format=csv -lms 500 > "$OUT/ovh_nvsmi.json" &
python3 docs/validation/cpu_of.py 60 nvidia-smi-dmon -- nvidia-smi dmon -d 1 > "$OUT/ovh_dmon.json" &
wait
cat "$OUT"/ovh_*.json

echo "== sample cost (µs) from the monitor's own measurement"
"$B" monitor --json --interval 100 --duration 5 > "$OUT/sample_cost.jsonl"
python3 - "$OUT/sample_cost.jsonl" <<'PY'
import json, statistics, sys
v = [json.loads(l)["sample_us"] for l in open(sys.argv[1]) if l.strip()]
print(json.dumps({"samples": len(v), "median_us": statistics.median(v), "max_us": max(v)}))
PY

echo "== proxy-torch step time with and without sampling at 2 Hz"
R="$OUT/ex/experiments/.primus-tune/trials/1/resolved.json"
python3 assets/proxy/proxy_torch.py --resolved "$R" --iters 30 > "$OUT/step_nosampling.log" 2>&1
"$B" monitor --json --interval 500 > /dev/null &
M2=$!
sleep 1
python3 assets/proxy/proxy_torch.py --resolved "$R" --iters 30 > "$OUT/step_sampling.log" 2>&1
kill -TERM $M2; wait $M2 2>/dev/null
for f in nosampling sampling; do
  "$B" parse-log "$OUT/step_$f.log" --json | python3 -c "import json,sys; s=json.load(sys.stdin)['summary']; print('$f', json.dumps({k: s[k] for k in ('n','median_step_ms','ci95_ms','cv')}))"
done | tee "$OUT/step_overhead.txt"

echo "== a trial stopped by SIGTERM to primus-tune while NVML is loaded: no process survives"
"$B" run "$EXP" --profile proxy-torch "${SMALL[@]}" --set micro_batch_size=1 --max-iters 200 --ci-target 0.0001 \
    --json > "$OUT/trial_sigterm.json" 2> "$OUT/trial_sigterm.err" &
RP=$!
sleep 20
kill -TERM $RP; wait $RP; echo "exit $?"
sleep 1
pgrep -af proxy_torch.py && echo "SURVIVOR" || echo "no proxy_torch.py process left"
python3 -c "import json; v=json.load(open('$OUT/trial_sigterm.json')); print(v['status'], v['failure'], v['iterations'])"

rm -rf "$OUT/ex/experiments/.primus-tune/trials"/*/resolved.json
tar -C "$(dirname "$OUT")" -czf "$FINAL/h200-validation.tar.gz" h200
echo done
