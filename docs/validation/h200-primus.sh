#!/usr/bin/env bash
# Issue 42 on the lent H200 (device tool): real Primus (fd1eeabb, Megatron backend, its pinned
# Megatron-LM d3528a21, Primus-Turbo off, mock data; no source patch) through primus-tune.
# Build what it needs first (docs/validation/h200-primus-setup.sh: .primus/, .whl/,
# bin/primus-tune), then on the device, from the repository root, one part per call:
#   PART=a  a trial through the shipped `primus` profile (ends `completed`, Primus' exit 0 kept),
#           `show --json --all` against Primus' own "Final backend args", and a Ctrl-C through
#           the user profile `primus-cuda` of docs/trials.md (nothing left on the GPU or in /proc)
#   PART=ctrlc  the Ctrl-C of part a alone
#   PART=b  a short sweep, micro batch x recompute (spaces/primus-mbs-recompute-h200.yaml)
#   PART=c  launch overhead: the same GPU-bound experiment by hand and through the tool,
#           alternating, RUNS of each (default 3)
#   PART=a OUT=$OUT bash docs/validation/h200-primus.sh
# Every command run is appended to $OUT/commands.txt; $OUT/index.txt says what each step gave.
set -u
PART=${PART:-a}
OUT=${OUT:-/tmp/pt-primus}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
R=$PWD
B=$R/bin/primus-tune
T0=$(date +%s)
DEADLINE=${DEADLINE:-$((T0 + 570))}
left() { echo $((DEADLINE - $(date +%s))); }
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/index.txt"; }
cmd() { echo "\$ $*" >> "$OUT/commands.txt"; "$@"; }
export PATH=/usr/local/nvidia/bin:$PATH

# The recipe's environment (../shared/research/primus-on-h200.md §3): the carried wheels on
# PYTHONPATH, the hooks' pip offline, an empty ROCM_HOME for the launcher's probe.
PYBIN=$(dirname "$(python3 -c 'import sys; print(sys.executable)')")
export PATH="$PYBIN:$PATH"
SITE=${TMPDIR:-/tmp}/site
extra=()
python3 -c 'import pydantic' 2> /dev/null ||
  extra+=("$R"/.whl/extra/pydantic-*.whl "$R"/.whl/extra/pydantic_core-*.whl)
python3 -c 'import annotated_types' 2> /dev/null || extra+=("$R"/.whl/extra/annotated_types-*.whl)
python3 -c 'import typing_inspection' 2> /dev/null || extra+=("$R"/.whl/extra/typing_inspection-*.whl)
# pydantic's floor for typing_extensions (the wheel carried is the one pip chose with it).
python3 - "$R"/.whl/extra/typing_extensions-*.whl << 'EOF' || extra+=("$R"/.whl/extra/typing_extensions-*.whl)
import sys, importlib.metadata as m
from packaging.version import Version as V
carried = sys.argv[1].rsplit("/", 1)[-1].split("-")[1]
sys.exit(0 if V(m.version("typing_extensions")) >= V(carried) else 1)
EOF
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  "$R"/.whl/*.whl "${extra[@]}" > "$OUT/pip.txt" 2>&1
log "wheels rc=$? (extra: ${extra[*]##*/})"
export PYTHONPATH=$SITE PIP_NO_INDEX=1 PIP_NO_DEPS=1 PIP_FIND_LINKS=$R/.whl
mkdir -p "${TMPDIR:-/tmp}/norocm/lib" /tmp/norocm/lib  # the README profile names /tmp/norocm
WORK=$(mktemp -d)
export XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data XDG_STATE_HOME=$WORK/state
export PRIMUS_TUNE_WORKSPACE=$WORK/ws PRIMUS_ROOT=$R/.primus
ENVS=(--env ROCM_HOME="${TMPDIR:-/tmp}/norocm" --env IP_INTERFACE=lo --env NCCL_SOCKET_IFNAME=lo
  --env GLOO_SOCKET_IFNAME=lo --env PIP_NO_INDEX=1 --env PIP_NO_DEPS=1)
TINY=$R/.primus/examples/h200/tiny_llama_cuda.yaml
BIG=$R/.primus/examples/h200/llama1b_gpu_bound_cuda.yaml
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$B" --version
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# Processes still carrying trial $1's id.
procs_of() {
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/environ"; } 2> /dev/null | grep -qx "PRIMUS_TUNE_TRIAL_ID=$1" &&
      echo "${p#/proc/}"
  done | tr '\n' ' '
}
gpu_apps() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' '; }
last_id() { "$B" trials --all --json 2> /dev/null | python3 -c \
  'import json,sys; t=json.load(sys.stdin); print(max((x["id"] for x in t), default=""))'; }
# The trial's log that holds Primus' own output.
primus_log_of() { grep -l "Final backend args" "$WORK"/ws/trials/"$1"/*.log 2> /dev/null | head -1; }
keep_trial() {
  tar -czf "$OUT/trial$1.tgz" -C "$WORK/ws/trials" "$1" 2> /dev/null
  "$B" trials show "$1" > "$OUT/trial$1.txt" 2>&1
  "$B" trials show "$1" --json > "$OUT/trial$1.json" 2>&1
}

part_a() {
  log "trial through the shipped primus profile"
  cmd "$B" run "$TINY" --profile primus --max-iters 30 --ci-target 0 --json "${ENVS[@]}" \
    > "$OUT/a-run.jsonl" 2> "$OUT/a-run.err" < /dev/null
  log "run rc=$?"
  local id
  id=$(last_id)
  keep_trial "$id"
  python3 - "$OUT/trial$id.json" << 'EOF' | tee -a "$OUT/index.txt"
import json, sys
t = json.load(open(sys.argv[1]))
s = t.get("summary") or {}
print("trial", t.get("id"), "status", t.get("status"), "stop", s.get("stop_reason"),
      "exit", t.get("exit_code"), "iterations", s.get("iterations"), "median step ms",
      s.get("median_step_ms"), "startup s", s.get("startup_s"))
EOF
  cmd "$B" show "$TINY" --profile primus --json --all "${ENVS[@]}" > "$OUT/show-all.json" 2> "$OUT/show.err"
  local plog
  plog=$(primus_log_of "$id")
  log "Primus log of trial $id: ${plog:-none}"
  [ -n "$plog" ] && python3 docs/validation/primus-final-args.py "$plog" "$OUT/show-all.json" \
    > "$OUT/final-args.txt" 2>&1
  log "final-args rc=$? ($(tail -n +1 "$OUT/final-args.txt" 2> /dev/null | grep -m1 'all keys'))"
}

part_ctrlc() {
  log "Ctrl-C through the user profile primus-cuda of docs/trials.md"
  mkdir -p "$XDG_CONFIG_HOME/primus-tune/profiles"
  # The profile exactly as docs/trials.md prints it.
  awk '/^# ~\/.config\/primus-tune\/profiles\/primus-cuda.yaml/{on=1} on&&/^```/{exit} on' \
    docs/trials.md > "$XDG_CONFIG_HOME/primus-tune/profiles/primus-cuda.yaml"
  cp "$XDG_CONFIG_HOME/primus-tune/profiles/primus-cuda.yaml" "$OUT/"
  "$B" run "$TINY" --profile primus-cuda --max-iters 200 --ci-target 0 --json \
    > "$OUT/a-ctrlc.jsonl" 2> "$OUT/a-ctrlc.err" < /dev/null &
  local pid=$! n=0
  echo "\$ $B run $TINY --profile primus-cuda --max-iters 200 --ci-target 0 --json & (SIGINT at iteration 5)" \
    >> "$OUT/commands.txt"
  while [ "$(left)" -gt 60 ] && kill -0 "$pid" 2> /dev/null; do
    n=$(grep -c '"event":"iteration"' "$OUT/a-ctrlc.jsonl" 2> /dev/null)
    [ "${n:-0}" -ge 5 ] && break
    sleep 1
  done
  id=$(last_id)
  local sent
  sent=$(date +%s.%N)
  kill -INT "$pid"
  wait "$pid"
  local rc=$? ended
  ended=$(date +%s.%N)
  sleep 2
  keep_trial "$id"
  {
    echo "Ctrl-C at iteration $n: primus-tune exited $rc after $(python3 -c "print('%.2f' % ($ended - $sent))") s"
    echo "  processes of trial $id left: [$(procs_of "$id")]; GPU compute apps 2 s later: [$(gpu_apps)]"
  } | tee -a "$OUT/index.txt"
}

part_b() {
  log "sweep micro batch x recompute"
  cmd "$B" sweep "$TINY" --profile primus --space docs/validation/spaces/primus-mbs-recompute-h200.yaml \
    --first-iters 8 --max-iters 16 --max-trials 6 --json "${ENVS[@]}" \
    > "$OUT/b-sweep.jsonl" 2> "$OUT/b-sweep.err" < /dev/null
  log "sweep rc=$?"
  "$B" studies > "$OUT/b-studies.txt" 2>&1
  "$B" trials --all > "$OUT/b-trials.txt" 2>&1
  "$B" trials --all --json > "$OUT/b-trials.json" 2>&1
  cat "$OUT/b-studies.txt" "$OUT/b-trials.txt"
  tar -czf "$OUT/b-trials.tgz" -C "$WORK/ws" trials 2> /dev/null
}

# One launch by hand: Primus' own launcher with the recipe's environment, the same iterations.
by_hand() {
  (cd "$R/.primus" && cmd timeout 300 bash runner/primus-cli direct \
    --env ROCM_HOME="${TMPDIR:-/tmp}/norocm" --env GPUS_PER_NODE=1 --env IP_INTERFACE=lo \
    --env NCCL_SOCKET_IFNAME=lo --env GLOO_SOCKET_IFNAME=lo \
    -- train pretrain --config "$BIG" > "$OUT/c-hand$1.log" 2>&1 < /dev/null)
}

part_c() {
  log "launch overhead: by hand and through the tool, alternating, $RUNS each"
  for i in $(seq 1 "$RUNS"); do
    [ "$(left)" -lt 150 ] && { log "stopped before pair $i: $(left) s left"; break; }
    local t=$(date +%s.%N)
    by_hand "$i"
    log "by hand $i rc=$? wall $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t))") s"
    t=$(date +%s.%N)
    cmd "$B" run "$BIG" --profile primus --max-iters 15 --ci-target 0 --json "${ENVS[@]}" \
      > "$OUT/c-tool$i.jsonl" 2> "$OUT/c-tool$i.err" < /dev/null
    log "tool $i rc=$? wall $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t))") s"
    local id
    id=$(last_id)
    cp "$(primus_log_of "$id")" "$OUT/c-tool$i.log" 2> /dev/null
  done
  # Both sides read by the same parser (Primus' own iteration lines), steps after warm-up.
  for f in "$OUT"/c-hand*.log "$OUT"/c-tool*.log; do
    [ -f "$f" ] || continue
    "$B" parse-log "$f" --json > "${f%.log}.parsed.json" 2> /dev/null
    python3 - "${f%.log}.parsed.json" << 'EOF' | tee -a "$OUT/c-medians.txt"
import json, statistics, sys
p = sys.argv[1]
try:
    d = json.load(open(p))
except Exception as e:
    print(p, "unreadable:", e); sys.exit()
its = d.get("iterations", d) if isinstance(d, dict) else d
ms = [i.get("elapsed_ms") or i.get("step_ms") for i in its if isinstance(i, dict)]
ms = [m for m in ms if m][3:]
print(p.rsplit("/", 1)[-1], "steps", len(ms), "median ms", round(statistics.median(ms), 1) if ms else None)
EOF
  done
}

case "$PART" in
  a) part_a && part_ctrlc ;;
  ctrlc) part_ctrlc ;;
  b) part_b ;;
  c) part_c ;;
  *) echo "PART must be a, ctrlc, b or c" >&2; exit 2 ;;
esac
tar -czf "$OUT/ws.tgz" -C "$WORK" ws 2> /dev/null
log "done (part $PART)"
