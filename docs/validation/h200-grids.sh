#!/usr/bin/env bash
# Issue 17 on the lent H200 (device tool): exhaustive grids of upstream Megatron-LM (commit
# d98e8a64, bin/megatron, never committed) launched through primus-tune's trial supervisor with the
# built-in `megatron-local` profile (the `megatron` profile's flags plus the ones that make
# Megatron-LM run without Transformer Engine/Apex: ../shared/research/megatron-on-h200.md):
#   gpt: a dense 12-layer GPT, hidden 1536 (ffn 6144, 12 heads of 128), sequence 2048, global batch 32
#   moe: 8 layers, hidden 1024, 16 heads of 64, 8 experts top-2 (expert ffn 2048), sequence 2048,
#        global batch 32
#   gqa: a held-out check (2026-12-03): 12 layers, hidden 2048 (SwiGLU ffn 5632), 16 heads of 128
#        in 4 query groups, sequence 4096, global batch 16 (so micro batch 1-16: MBS_ORDER="1 2 4 8 16")
# each micro batch 1/2/4/8/16/32 × recompute none | selective | full (uniform, 1 layer), one
# 20-iteration trial per candidate with no early stop (--ci-target 0), each grid into its own trial
# database. The shape rides on the bundled Llama-3-8B experiment (SwiGLU, RMSNorm, RoPE, untied
# embeddings, no linear biases) with --set, plus transformer_impl=local and use_flash_attn=false so
# that the resolved config says what Megatron-LM runs. Order: the dense grid first, then the MoE
# grid; within a grid micro batch by micro batch (all three recompute modes of one before the next),
# so a grid cut short by the device budget is still a clean sub-grid. A run is launched only while
# more than STOP_MARGIN seconds of device budget remain (the budget's end is the epoch second in
# /tmp/grids/end, written from the lease's budget_left_s by each call), and each run has a hard
# timeout. A grid's first run failing for any reason but out-of-memory stops that grid.
#
# The device machine releases a warm machine 30 s after a call and kills what a call leaves
# running unless it started its own session, so the grid runs detached (setsid) in /tmp/grids and
# each call waits up to POLL_S seconds, then packs what is there into $OUT/grids.tgz. From the
# repository root, bin/ carried (the release binary and the Megatron-LM tree):
#   PART=start BUDGET_LEFT=<s> OUT=$OUT bash docs/validation/h200-grids.sh   # first call
#   PART=poll  BUDGET_LEFT=<s> OUT=$OUT bash docs/validation/h200-grids.sh   # each later call
# (BUDGET_LEFT: the lease's budget_left_s from the previous reply, less the seconds since; on the
# first call, the budget less the machine's start.) Then here:
#   python3 docs/validation/replay_table.py .../gpt/grid.db --knobs micro_batch_size,\
#     recompute_granularity,recompute_method,recompute_num_layers --capacity-gib 140.4 > ...
set -u
G=${G:-/tmp/grids}
D=$G/out
PART=${PART:-poll}
ITERS=${ITERS:-20}
STOP_MARGIN=${STOP_MARGIN:-120}   # no launch with less device budget left than this
RUN_LIMIT=${RUN_LIMIT:-170}       # hard limit of one run (start-up ~25-55 s + 20 iterations)
POLL_S=${POLL_S:-540}
GRIDS=${GRIDS:-gpt moe}           # which grids, in this order
MBS_ORDER=${MBS_ORDER:-1 2 4 8 16 32}   # micro batches, in this order
export PATH=/usr/local/nvidia/bin:$PATH

gpu_line() {
  nvidia-smi --query-gpu=timestamp,name,driver_version,memory.total,memory.used,power.draw,power.limit,temperature.gpu,clocks.sm \
    --format=csv,noheader
}

# one row of grid.txt from the newest trial of database $1
summarize() {
  python3 - "$1" <<'EOF'
import json, sqlite3, statistics, sys
c = sqlite3.connect(sys.argv[1])
r = c.execute("select id, status, failure_class, failure_line, wall_s, median_step_ms, ci95_ms, "
              "peak_mem_gib, iterations_seen, summary, tflops_per_gpu from trials order by id desc limit 1").fetchone()
if r is None:
    print("  no trial stored"); sys.exit()
tid, st, fc, fl, wall, med, ci, peak, n, summ, tf = r
s = json.loads(summ) if summ else {}
it = [ms for (ms,) in c.execute("select elapsed_ms from iterations where trial_id=? order by iteration", (tid,)) if ms]
vram = c.execute("select max(vram_used_bytes) from samples where trial_id=?", (tid,)).fetchone()[0]
def f(x, p=1):
    return "-" if x is None else f"{x:.{p}f}"
print(f"  trial {tid}: {st} {fc or ''} | iterations {n} | median {f(med)} ms ± {f(ci)} "
      f"| median it>=3 {f(statistics.median(it[2:]) if len(it) > 2 else None)} ms | TFLOP/s {f(tf)} "
      f"| peak {f(peak, 2)} GiB ({s.get('peak_mem_source', '-')}) | telemetry max VRAM "
      f"{f(vram / 2**30 if vram else None, 2)} GiB | start-up {f(s.get('startup_s'))} s | wall {f(wall)} s")
if fl:
    print("  failure line: " + fl[:300])
EOF
}

grid() {
  B=$G/primus-tune
  export MEGATRON_PATH=$G/megatron
  W=$G/work
  export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data PRIMUS_TUNE_WORKSPACE=$W/ws
  EXP=$W/ex/experiments/llama3_8B-BF16-pretrain.yaml
  COMMON=(--set seq_length=2048 --set max_position_embeddings=2048 --set global_batch_size=32
          --set transformer_impl=local --set use_flash_attn=false)
  GPT=(--set num_layers=12 --set hidden_size=1536 --set ffn_hidden_size=6144
       --set num_attention_heads=12 --set num_query_groups=12)
  MOE=(--set num_layers=8 --set hidden_size=1024 --set ffn_hidden_size=2048 --set moe_ffn_hidden_size=2048
       --set num_attention_heads=16 --set num_query_groups=16 --set num_experts=8 --set moe_router_topk=2)
  GQA=(--set num_layers=12 --set hidden_size=2048 --set ffn_hidden_size=5632
       --set num_attention_heads=16 --set num_query_groups=4
       --set seq_length=4096 --set max_position_embeddings=4096 --set global_batch_size=16)
  mkdir -p "$D/gpt" "$D/moe" "$D/gqa"
  echo "grid started $(date -u +%FT%TZ)" >> "$D/grid.txt"
  for name in $GRIDS; do
    case $name in
      gpt) SHAPE=("${GPT[@]}") ;;
      moe) SHAPE=("${MOE[@]}") ;;
      gqa) SHAPE=("${GQA[@]}") ;;  # after COMMON, so its sequence and batch win
    esac
    first=1
    for mbs in $MBS_ORDER; do
      for rc in none selective full; do
        case $rc in
          none) RC=() ;;
          selective) RC=(--set recompute_granularity=selective) ;;
          full) RC=(--set recompute_granularity=full --set recompute_method=uniform --set recompute_num_layers=1) ;;
        esac
        now=$(date +%s); end=$(cat "$G/end")
        if [ $((end - now)) -lt "$STOP_MARGIN" ]; then
          echo "== $name mbs=$mbs recompute=$rc: NOT RUN (device budget: $((end - now)) s left)" | tee -a "$D/grid.txt"
          continue
        fi
        lim=$((end - 40 - now)); [ $lim -gt "$RUN_LIMIT" ] && lim=$RUN_LIMIT
        args=(run "$EXP" "${COMMON[@]}" "${SHAPE[@]}" --set micro_batch_size=$mbs "${RC[@]}"
              --profile megatron-local --gpus 1 --max-iters "$ITERS" --ci-target 0 --grace-seconds 5
              --first-iteration-seconds 150 --hang-seconds 60 --db "$D/$name/grid.db")
        echo "\$ timeout -k 15 -s TERM $lim primus-tune ${args[*]}" >> "$D/commands.txt"
        log="$D/$name/mbs$mbs-$rc.console.log"
        t0=$(date +%s.%N)
        echo "== $name mbs=$mbs recompute=$rc launched $(date -u +%FT%TZ) (limit $lim s)" | tee -a "$D/grid.txt"
        timeout -k 15 -s TERM "$lim" "$B" "${args[@]}" > "$log" 2>&1
        ec=$?
        t1=$(date +%s.%N)
        echo "  exit $ec, $(python3 -c "print(f'{$t1-$t0:.1f}')") s launch to exit" >> "$D/grid.txt"
        summarize "$D/$name/grid.db" >> "$D/grid.txt" 2>&1
        # nothing of the trial may stay on the GPU before the next one
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
        echo "$name mbs=$mbs rc=$rc after: $(gpu_line)" >> "$D/gpu.txt"
        if [ $first = 1 ]; then
          first=0
          st=$(python3 -c "import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute('select status, coalesce(failure_class,\"\") from trials order by id desc limit 1').fetchone(); print(*(r or ('none','')))" "$D/$name/grid.db")
          case "$st" in
            completed*|*oom) ;;
            *) echo "== first $name run: $st — $name grid stopped" | tee -a "$D/grid.txt"; break 2 ;;
          esac
        fi
      done
    done
  done
  echo "grid finished $(date -u +%FT%TZ)" >> "$D/grid.txt"
}

pack() {
  P=$G/pack
  rm -rf "$P"; mkdir -p "$P"
  (cd "$D" && find . -path ./pack -prune -o -type f ! -name 'grid.db*' -print | tar -cf - -T -) | tar -xf - -C "$P"
  for name in gpt moe gqa; do
    [ -f "$D/$name/grid.db" ] || continue
    mkdir -p "$P/$name"
    python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
      "$D/$name/grid.db" "$P/$name/grid.db"
  done
  tar -czf "$OUT/grids.tgz" -C "$P" .
  ls -la "$OUT"
}

case $PART in
  start)
    mkdir -p "$G/work" "$D"
    echo $(( $(date +%s) + ${BUDGET_LEFT:-1600} )) > "$G/end"
    cp bin/primus-tune "$G/primus-tune"
    cp -r bin/megatron "$G/megatron"
    cp -r presets/examples "$G/work/ex"
    cp "$0" "$G/h200-grids.sh"
    nvidia-smi > "$D/nvidia-smi.txt" 2>&1
    gpu_line | tee "$D/gpu.txt"
    "$G/primus-tune" --version >> "$D/gpu.txt" 2>&1
    PART=grid GRIDS="$GRIDS" MBS_ORDER="$MBS_ORDER" setsid nohup bash "$G/h200-grids.sh" > "$D/grid.console.log" 2>&1 < /dev/null &
    echo $! > "$G/pid"
    sleep 2
    ;;
  grid)
    echo $$ > "$G/pid"
    grid
    exit 0
    ;;
esac
# poll (and the rest of start): wait for the grid or POLL_S seconds, then pack
[ -n "${BUDGET_LEFT:-}" ] && [ "$PART" = poll ] && echo $(( $(date +%s) + BUDGET_LEFT )) > "$G/end"
echo "budget end in $(( $(cat "$G/end") - $(date +%s) )) s"
t=0
while kill -0 "$(cat "$G/pid")" 2>/dev/null && [ $t -lt "$POLL_S" ]; do sleep 5; t=$((t + 5)); done
kill -0 "$(cat "$G/pid")" 2>/dev/null && echo "grid still running" || echo "grid done"
grep -c '^== ' "$D/grid.txt"
tail -n 40 "$D/grid.txt"
pack
