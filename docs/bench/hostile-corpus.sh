#!/usr/bin/env bash
# The hostile corpus (issue 43): every command that reads a file, on each input of the corpus
# tests/hostile/corpus.rs generates (exponential extends, a 15 MiB flow list, 300,000 anchors,
# a billion laughs, deep nesting, 15 MiB lines, duplicate and merge keys, a FIFO, /dev/zero, a
# folder, a 100,000-iteration log). Prints one Markdown row a case: wall time, peak RSS
# (VmHWM, sampled every millisecond), exit status, and whether the goal (<= 2 s, <= 256 MB per
# MiB of input + 64 MB, an answer or a refusal naming the cause) is met. Each case is killed
# after HOSTILE_KILL_S seconds (default 30).
#
#   cargo build --release && bash docs/bench/hostile-corpus.sh
#   B=/path/to/other/primus-tune bash docs/bench/hostile-corpus.sh   # another build
set -eu
B=${B:-target/release/primus-tune}
PRIMUS_TUNE_BIN=$(realpath "$B") cargo test -q --test hostile_inputs -- --ignored --nocapture figures
