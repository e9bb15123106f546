#!/usr/bin/env bash
# Issue 17 on the lent H200 (device tool): an exhaustive grid of upstream TorchTitan v0.2.2 (the
# version Primus pins; bin/titan, never committed) launched through primus-tune's trial
# supervisor with the profile profiles/torchtitan-h200.yaml: Qwen3 1.7B (titan/qwen3_1.7b-h200.toml,
# the experiment titan/qwen3_1.7B-torchtitan-h200.yaml in a copy of the bundled example tree),
# sequence 2048, bf16 autocast (one GPU: no FSDP), compile off, AdamW; the space titan-memory-fit:
# training.local_batch_size 1/2/4/8/16/32 x activation_checkpoint.mode none | selective (op) | full,
# one 20-step trial per candidate with no early stop, into one trial database.
# TorchTitan's Python dependencies the machine lacks are installed from bin/wheels (pip download
# here) into a folder on PYTHONPATH; Hugging Face's datasets (pyarrow, network) is replaced by
# titan/datasets, a stand-in serving generated text for the c4_test name (as Megatron's
# --mock-data; the data does not change a step's time or memory).
# As h200-grids.sh: the grid runs detached, each call waits up to POLL_S s and packs what is there
# into $OUT/titan.tgz; a run is launched only while STOP_MARGIN s of device budget remain.
#   PART=start BUDGET_LEFT=<s> OUT=$OUT bash docs/validation/h200-titan.sh   # first call
#   PART=poll  BUDGET_LEFT=<s> OUT=$OUT bash docs/validation/h200-titan.sh   # each later call
# PART=sweep (one call, a fresh machine): `primus-tune sweep` of the same experiment over
# spaces/titan-h200.yaml (local batch 2/4/8/16 x checkpointing; current: local batch 4) in an
# empty workspace, as a user would run it; its output, decision log and trial database in $OUT.
# PART=compile (one call, a fresh machine): the same runs with torch.compile on (model and loss,
# Primus' default) for COMPILE_RUNS (lbs:mode ...), into $OUT/compile/.
# MODEL=4b (with LBS_ORDER="1 2 4 8"): the held-out grid of 2026-12-04, Qwen3 4B at sequence 4096
# (titan/qwen3_4b-h200.toml, titan/qwen3_4B-torchtitan-h200.yaml), the same way.
# Then here: python3 docs/validation/replay_table.py .../grid.db --knobs \
#   training.local_batch_size,activation_checkpoint.mode --capacity-gib 139.8 > table.json
set -u
G=${G:-/tmp/titan}
D=$G/out
PART=${PART:-poll}
ITERS=${ITERS:-20}
STOP_MARGIN=${STOP_MARGIN:-100}
RUN_LIMIT=${RUN_LIMIT:-200}
POLL_S=${POLL_S:-540}
LBS_ORDER=${LBS_ORDER:-1 2 4 8 16 32}
# the model: the TOML in titan/ and the experiment that mirrors it (MODEL=4b: the held-out grid of
# 2026-12-04, Qwen3 4B at sequence 4096: LBS_ORDER="1 2 4 8")
# (MODEL=4b-float8 with LBS_ORDER="1 2 4": the same model compiled, bf16 against float8 linears with
# tensorwise and rowwise scaling, torchao from bin/wheels; the space titan-float8-h200.
# MODEL=1.7b-float8 with LBS_ORDER="4 8 16": Qwen3 1.7B compiled, bf16 and tensorwise, a held-out
# check of the float8 memory term)
VARIANTS="none selective full"
case ${MODEL:-1.7b} in
  4b) TOML=qwen3_4b-h200.toml EXPF=qwen3_4B-torchtitan-h200.yaml SPACE=titan-4b-h200 ;;
  4b-float8) TOML=qwen3_4b-float8-h200.toml EXPF=qwen3_4B-float8-h200.yaml SPACE=titan-float8-h200
    VARIANTS="bf16 tensorwise rowwise" ;;
  1.7b-float8) TOML=qwen3_1.7b-float8-h200.toml EXPF=qwen3_1.7B-float8-h200.yaml SPACE=titan-float8-h200
    VARIANTS="bf16 tensorwise" ;;
  *) TOML=qwen3_1.7b-h200.toml EXPF=qwen3_1.7B-torchtitan-h200.yaml SPACE=titan-h200 ;;
esac
# SWEEP_SPACE=NAME: PART=sweep sweeps docs/validation/spaces/NAME.yaml instead (with MODEL=1.7b-float8,
# titan-float8-1.7b-h200: the held-out grid's local batch 4/8/16 x bf16 / tensorwise)
SPACE=${SWEEP_SPACE:-$SPACE}
export PATH=/usr/local/nvidia/bin:$PATH

gpu_line() {
  nvidia-smi --query-gpu=timestamp,name,driver_version,memory.total,memory.used,power.draw,temperature.gpu,clocks.sm \
    --format=csv,noheader
}

summarize() {
  python3 - "$1" <<'PY'
import json, sqlite3, statistics, sys
c = sqlite3.connect(sys.argv[1])
r = c.execute("select id, status, failure_class, failure_line, wall_s, median_step_ms, ci95_ms, "
              "peak_mem_gib, iterations_seen, summary from trials order by id desc limit 1").fetchone()
if r is None:
    print("  no trial stored"); sys.exit()
tid, st, fc, fl, wall, med, ci, peak, n, summ = r
s = json.loads(summ) if summ else {}
it = [ms for (ms,) in c.execute("select elapsed_ms from iterations where trial_id=? order by iteration", (tid,)) if ms]
vram = c.execute("select max(vram_used_bytes) from samples where trial_id=?", (tid,)).fetchone()[0]
f = lambda x, p=1: "-" if x is None else f"{x:.{p}f}"
print(f"  trial {tid}: {st} {fc or ''} | steps {n} | median {f(med)} ms ± {f(ci)} "
      f"| median step>=3 {f(statistics.median(it[2:]) if len(it) > 2 else None)} ms "
      f"| peak {f(peak, 2)} GiB ({s.get('peak_mem_source', '-')}) | telemetry max VRAM "
      f"{f(vram / 2**30 if vram else None, 2)} GiB | start-up {f(s.get('startup_s'))} s | wall {f(wall)} s")
if fl:
    print("  failure line: " + fl[:300])
PY
}

setup() {
  mkdir -p "$G/work" "$D" "$G/site"
  cp bin/primus-tune "$G/primus-tune"
  cp -r bin/titan "$G/titan"
  cp docs/validation/titan/*.toml "$G/titan/"
  cp -r presets/examples "$G/work/ex"
  cp docs/validation/titan/qwen3_*-h200.yaml "$G/work/ex/experiments/"
  mkdir -p "$G/work/config/primus-tune/profiles"
  cp docs/validation/profiles/torchtitan-h200.yaml "$G/work/config/primus-tune/profiles/"
  cp "$0" "$G/h200-titan.sh"
  # only what the machine lacks, so nothing it has is shadowed
  for pair in torchdata:torchdata tyro:tyro tokenizers:tokenizers einops:einops tomli:tomli \
      fsspec:fsspec tensorboard:tensorboard tensorboard_data_server:tensorboard_data_server \
      google.protobuf:protobuf docstring_parser:docstring_parser typeguard:typeguard \
      typing_extensions:typing_extensions absl:absl_py markdown:markdown markupsafe:markupsafe \
      werkzeug:werkzeug packaging:packaging yaml:pyyaml tqdm:tqdm huggingface_hub:huggingface_hub; do
    mod=${pair%%:*}; whl=${pair##*:}
    if python3 -c "import $mod" 2>/dev/null; then echo "have $mod"; else
      echo "install $whl"; python3 -m pip install -q --no-deps --no-index --target "$G/site" bin/wheels/$whl-*.whl 2>&1 | tail -2
    fi
  done
  cp -r docs/validation/titan/datasets "$G/site/"
  m=${MODEL:-}
  if [ "${m%-float8}" != "$m" ]; then
    # torchao for float8 linears: 0.17 (built against torch 2.11), else 0.18
    for v in 0.17.0 0.18.0; do
      rm -rf "$G/site/torchao" "$G/site"/torchao-*
      python3 -m pip install -q --no-deps --no-index --target "$G/site" bin/wheels/torchao-$v-*.whl 2>&1 | tail -2
      # a float8 linear forward and backward, compiled, as TorchTitan's converter makes it
      if (cd /tmp && PYTHONPATH=$G/site timeout 240 python3 - <<'PY'
import torch, torchao
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
for recipe in ("tensorwise", "rowwise"):
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.Linear(4096, 1024)).cuda()
    convert_to_float8_training(m, config=Float8LinearConfig.from_recipe_name(recipe))
    m = torch.compile(m)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = m(torch.randn(4096, 1024, device="cuda"))
    y.float().sum().backward()
    print("torchao", torchao.__version__, recipe, "float8 linear compiled, forward and backward: ok")
PY
      ); then break; fi
      echo "torchao $v: the float8 check failed"
    done
  fi
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.version.cuda)"
  (cd "$G/titan" && PYTHONPATH=$G/titan:$G/site python3 -c "import torchtitan.train; print('torchtitan.train imports')") 2>&1 | tail -5
}

grid() {
  B=$G/primus-tune
  W=$G/work
  export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data PRIMUS_TUNE_WORKSPACE=$W/ws
  export TITAN_PATH=$G/titan TITAN_SITE=$G/site TITAN_TOML=$G/titan/$TOML
  EXP=$W/ex/experiments/$EXPF
  echo "grid started $(date -u +%FT%TZ)" >> "$D/grid.txt"
  first=1
  for lbs in $LBS_ORDER; do
    for ac in $VARIANTS; do
      now=$(date +%s); end=$(cat "$G/end")
      if [ $((end - now)) -lt "$STOP_MARGIN" ]; then
        echo "== lbs=$lbs ac=$ac: NOT RUN (device budget: $((end - now)) s left)" | tee -a "$D/grid.txt"
        continue
      fi
      lim=$((end - 30 - now)); [ $lim -gt "$RUN_LIMIT" ] && lim=$RUN_LIMIT
      # checkpointing (none/selective/full), or the precision of the linears (bf16: the
      # experiment's own, no converter; tensorwise/rowwise: float8 linears with that scaling)
      case $ac in
        none|selective|full) sets=(--set activation_checkpoint.mode=$ac) ;;
        bf16) sets=() ;;
        *) sets=(--set "model.converters=['quantize.linear.float8']" --set quantize.linear.float8.recipe_name=$ac) ;;
      esac
      args=(run "$EXP" --set training.local_batch_size=$lbs "${sets[@]}"
            --profile torchtitan-h200 --gpus 1 --max-iters "$ITERS" --ci-target 0 --grace-seconds 5
            --first-iteration-seconds "${FIRST_S:-150}" --hang-seconds 60 --db "$D/grid.db")
      echo "\$ timeout -k 15 -s TERM $lim primus-tune ${args[*]}" >> "$D/commands.txt"
      t0=$(date +%s.%N)
      echo "== lbs=$lbs ac=$ac launched $(date -u +%FT%TZ) (limit $lim s)" | tee -a "$D/grid.txt"
      timeout -k 15 -s TERM "$lim" "$B" "${args[@]}" > "$D/lbs$lbs-$ac.console.log" 2>&1
      ec=$?
      t1=$(date +%s.%N)
      echo "  exit $ec, $(python3 -c "print(f'{$t1-$t0:.1f}')") s launch to exit" >> "$D/grid.txt"
      summarize "$D/grid.db" >> "$D/grid.txt" 2>&1
      for i in $(seq 20); do
        left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr -d ' ')
        [ -z "$left" ] && break
        sleep 1
      done
      if [ -n "$left" ]; then
        echo "  left on the GPU after 20 s: $left (killed)" >> "$D/grid.txt"
        for p in $left; do kill -9 "$p" 2>/dev/null; done
        sleep 3
      fi
      echo "lbs=$lbs ac=$ac after: $(gpu_line)" >> "$D/gpu.txt"
      if [ $first = 1 ]; then
        first=0
        st=$(python3 -c "import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute('select status, coalesce(failure_class,\"\") from trials order by id desc limit 1').fetchone(); print(*(r or ('none','')))" "$D/grid.db")
        case "$st" in
          completed*|*oom) ;;
          *) echo "== first run: $st — grid stopped" | tee -a "$D/grid.txt"; break 2 ;;
        esac
      fi
    done
  done
  echo "grid finished $(date -u +%FT%TZ)" >> "$D/grid.txt"
}

pack() {
  P=$G/pack
  rm -rf "$P"; mkdir -p "$P/trials"
  (cd "$D" && find . -type f ! -name 'grid.db*' -print | tar -cf - -T -) | tar -xf - -C "$P"
  # each trial's own logs (TorchTitan's stdout/stderr, argv, env)
  (cd "$G/work/ws" 2>/dev/null && find . -path '*trials/*' -type f \( -name '*.log' -o -name 'argv.json' \) -print | tar -cf - -T -) | tar -xf - -C "$P/trials" 2>/dev/null
  [ -f "$D/grid.db" ] && python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" "$D/grid.db" "$P/grid.db"
  tar -czf "$OUT/titan.tgz" -C "$P" .
  ls -la "$OUT"
}

sweep() {
  B=$G/primus-tune
  W=$G/work
  export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data PRIMUS_TUNE_WORKSPACE=$W/ws-sweep
  export TITAN_PATH=$G/titan TITAN_SITE=$G/site TITAN_TOML=$G/titan/$TOML
  EXP=$W/ex/experiments/$EXPF
  args=(sweep "$EXP" --space docs/validation/spaces/$SPACE.yaml --profile torchtitan-h200
        --gpus 1 --name $SPACE)
  echo "\$ primus-tune ${args[*]}" > "$OUT/sweep.txt"
  t0=$(date +%s)
  timeout -k 15 -s TERM "${LIMIT:-480}" "$B" "${args[@]}" >> "$OUT/sweep.txt" 2>&1
  echo "exit $? after $(( $(date +%s) - t0 )) s" >> "$OUT/sweep.txt"
  "$B" studies show $SPACE --log --config "$EXP" > "$OUT/log.txt" 2>&1
  "$B" trials --all > "$OUT/trials.txt" 2>&1
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
    "$W/ws-sweep/trials.db" "$OUT/trials.db" 2>> "$OUT/sweep.txt"
  cat "$OUT/sweep.txt"
}

compiled() {
  B=$G/primus-tune
  W=$G/work
  export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data PRIMUS_TUNE_WORKSPACE=$W/ws-compile
  export TITAN_PATH=$G/titan TITAN_SITE=$G/site TITAN_TOML=$G/titan/${TOML%.toml}-compile.toml
  sed '/^\[compile\]/,/^\[/ s/^enable = false/enable = true/' "$G/titan/$TOML" > "$TITAN_TOML"
  grep -A2 '^\[compile\]' "$TITAN_TOML" > "$OUT/compile/toml.txt"
  EXP=$W/ex/experiments/$EXPF
  for run in ${COMPILE_RUNS:-4:none 8:none 8:full 16:full}; do
    lbs=${run%%:*}; ac=${run##*:}
    args=(run "$EXP" --set training.local_batch_size=$lbs --set activation_checkpoint.mode=$ac
          --profile torchtitan-h200 --gpus 1 --max-iters "$ITERS" --ci-target 0 --grace-seconds 5
          --first-iteration-seconds 240 --hang-seconds 90 --db "$OUT/compile/compile.db")
    echo "\$ primus-tune ${args[*]}" >> "$OUT/compile/commands.txt"
    echo "== lbs=$lbs ac=$ac compiled $(date -u +%FT%TZ)" | tee -a "$OUT/compile/grid.txt"
    timeout -k 15 -s TERM "${RUN_LIMIT}" "$B" "${args[@]}" > "$OUT/compile/lbs$lbs-$ac.console.log" 2>&1
    echo "  exit $?" >> "$OUT/compile/grid.txt"
    summarize "$OUT/compile/compile.db" >> "$OUT/compile/grid.txt" 2>&1
    sleep 3
  done
  cat "$OUT/compile/grid.txt"
}

case $PART in
  compile)
    mkdir -p "$G" "$D" "$OUT/compile"
    setup > "$OUT/compile/setup.txt" 2>&1
    compiled
    exit 0
    ;;
  sweep)
    mkdir -p "$G" "$D"
    setup > "$OUT/setup.txt" 2>&1
    gpu_line > "$OUT/gpu.txt"
    sweep
    exit 0
    ;;
  start)
    mkdir -p "$G" "$D"
    echo $(( $(date +%s) + ${BUDGET_LEFT:-1600} )) > "$G/end"
    setup 2>&1 | tee "$D/setup.txt"
    nvidia-smi > "$D/nvidia-smi.txt" 2>&1
    gpu_line | tee "$D/gpu.txt"
    "$G/primus-tune" --version >> "$D/gpu.txt" 2>&1
    PART=grid LBS_ORDER="$LBS_ORDER" MODEL="${MODEL:-1.7b}" setsid nohup bash "$G/h200-titan.sh" > "$D/grid.console.log" 2>&1 < /dev/null &
    echo $! > "$G/pid"
    sleep 2
    ;;
  grid)
    echo $$ > "$G/pid"
    grid
    exit 0
    ;;
esac
[ -n "${BUDGET_LEFT:-}" ] && [ "$PART" = poll ] && echo $(( $(date +%s) + BUDGET_LEFT )) > "$G/end"
echo "budget end in $(( $(cat "$G/end") - $(date +%s) )) s"
t=0
while kill -0 "$(cat "$G/pid")" 2>/dev/null && [ $t -lt "$POLL_S" ]; do sleep 5; t=$((t + 5)); done
kill -0 "$(cat "$G/pid")" 2>/dev/null && echo "grid still running" || echo "grid done"
grep -c '^== ' "$D/grid.txt"
tail -n 30 "$D/grid.txt"
pack
