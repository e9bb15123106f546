#!/usr/bin/env bash
# Regenerates the TUI screenshots in this folder (plain text, 80×24, NO_COLOR) by driving the
# release binary through a private tmux server on a scratch copy of presets/examples.
# Needs tmux; builds the release binary first (in $CARGO_TARGET_DIR when set, else target/).
# Run from anywhere:
#   assets/screens/capture.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
out=$repo/assets/screens
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$repo/target}/release/primus-tune

# A fixed folder, so the paths on the screens stay the same from one capture to the next.
work=${TMPDIR:-/tmp}/primus-tune-demo
rm -rf "$work"
mkdir -p "$work"
sock=primus-tune-screens-$$
tm() { tmux -u -f /dev/null -L "$sock" "$@"; }
cleanup() {
  local socket
  socket=$(tm display-message -p '#{socket_path}' 2>/dev/null || true)
  tm kill-server >/dev/null 2>&1 || true
  case $socket in *"$sock") rm -f "$socket" ;; esac
  rm -rf "$work"
}
trap cleanup EXIT
cp -R presets/examples "$work/examples"
cat >"$work/launch.sh" <<LAUNCH
unset PRIMUS_ROOT PRIMUS_HIPBLASLT_TUNING PRIMUS_HIPBLASLT_TUNING_STAGE CUDA_DEVICE_MAX_CONNECTIONS COLORTERM
export NO_COLOR=1 TERM=xterm-256color XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config"
exec "$bin" examples/experiments/moe_16B-BF16-pretrain.yaml --no-tour
LAUNCH

# Poll the screen every 50 ms until it matches (grep -E) or no longer does, 30 s at most.
wait_for() {
  local i
  for i in $(seq 600); do
    if tm capture-pane -p -t tui | grep -qE -- "$1"; then return 0; fi
    sleep 0.05
  done
  echo "timed out waiting for: $1" >&2
  tm capture-pane -p -t tui >&2
  exit 1
}
wait_gone() {
  local i
  for i in $(seq 600); do
    if ! tm capture-pane -p -t tui | grep -qE -- "$1"; then return 0; fi
    sleep 0.05
  done
  echo "timed out waiting for this to go: $1" >&2
  tm capture-pane -p -t tui >&2
  exit 1
}
shot() { tm capture-pane -p -t tui >"$out/$1.txt"; echo "wrote assets/screens/$1.txt"; }
keys() { tm send-keys -t tui "$@"; }

# A short finished sweep for the Studies screen: micro batch 2 against the current 4, a knob the
# CPU proxy models (it refuses to rank knobs it does not model), a few short trials.
cat >"$work/micro-batch.yaml" <<'SPACE'
name: micro-batch
description: micro batch size only (a short demo the CPU proxy models)
knobs:
  - flag: micro_batch_size
    values: [2, 4]
    memory: increasing
SPACE
(
  cd "$work"
  unset PRIMUS_ROOT PRIMUS_TUNE_WORKSPACE GPUS_PER_NODE
  XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config" "$bin" sweep \
    examples/experiments/moe_16B-BF16-pretrain.yaml --space micro-batch.yaml --profile proxy-cpu \
    --name demo-micro-batch --first-iters 6 --max-iters 12 --no-telemetry --allow-unmodeled \
    >"$work/sweep.log" 2>&1 ||
    { echo "the demo sweep failed:" >&2; cat "$work/sweep.log" >&2; exit 1; }
)

tm new-session -d -s tui -x 80 -y 24 -c "$work" "sh launch.sh; echo EXITED \$?; sleep 60"

# Checklist, the Memory step selected.
wait_for 'Quick checklist'
keys Down Down Down
wait_for 'Memory — '
shot checklist

# Run: a proxy-cpu trial (runs on any CPU), caught while it runs.
keys 3
wait_for 'no trial yet'
keys r
wait_for 'it (1[2-9]|[2-4][0-9])/50 '
shot run
wait_for 'trial [0-9]+ (completed|failed|stopped)'

# Trials with the detail view.
keys 4
wait_for 'Trials · [0-9]+ '
keys Enter
wait_for 'Detail'
shot trials

# Studies: the sweep run above.
keys 6
wait_for 'Studies · 1 '
shot studies

# Flags: the Memory step's flags, micro_batch_size edited to 2 (unsaved).
keys 1
wait_for 'Quick checklist'
keys Home
wait_for 'GEMMs \(HipBLASLt tuning\) — '
keys Down Down Down
wait_for 'Memory — '
keys Enter
wait_for 'Flags · Memory'
for _ in $(seq 40); do
  if tm capture-pane -p -t tui | grep -qE '^│micro_batch_size  '; then break; fi
  keys Down
  sleep 0.05
done
wait_for '^│micro_batch_size  '
keys Enter
wait_for 'micro_batch_size = [0-9]+▏'
keys BSpace BSpace BSpace BSpace
keys -l 2
wait_for 'micro_batch_size = 2▏'
keys Enter
wait_for '1 unsaved'
shot flags

# The key help, over the Flags screen.
keys '?'
wait_for '┌ Keys '
shot help

# Leave without saving.
keys Escape
wait_gone '┌ Keys '
keys u
wait_for 'undid micro_batch_size'
keys q
wait_for 'EXITED 0'
