#!/usr/bin/env bash
# Inputs that cost too much (issue 15): an experiment with N unknown keys under its overrides,
# and a log with one 1 GiB line. Writes them under $1 (default /tmp/pt-hostile) and times
# `lint` and `parse-log` with the binary $B (default target/release/primus-tune).
set -eu
D=${1:-/tmp/pt-hostile}
B=${B:-target/release/primus-tune}
mkdir -p "$D"
XDG_DATA_HOME="$D/data" "$B" checklist > /dev/null
cp -r "$D"/data/primus-tune/examples-*/. "$D/ex" 2>/dev/null || true
for n in 1000 20000 100000; do
  python3 - "$D/ex/experiments" "$n" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
src = open(f"{d}/llama3_8B-BF16-pretrain.yaml").read()
extra = "".join(f"      zz_unknown_key_{i}: {i}\n" for i in range(n))
open(f"{d}/unk{n}.yaml", "w").write(src.replace("      train_iters: 50\n", "      train_iters: 50\n" + extra))
PY
  /usr/bin/time -f "lint, $n unknown keys: %e s, %M KB peak RSS" "$B" lint "$D/ex/experiments/unk$n.yaml" > /dev/null
done
python3 - "$D/big.log" <<'PY'
import sys
line = lambda i: f" [2026-11-29 22:59:27.865632] iteration {i:>8}/      50 | consumed samples: {16*i:>12} | elapsed time per iteration (ms): 100.0 | global batch size:    16 |\n".encode()
with open(sys.argv[1], "wb") as f:
    f.write(line(1))
    for _ in range(64):
        f.write(b"y" * (1 << 24))
    f.write(b"\n")
    f.write(line(2))
PY
/usr/bin/time -f "parse-log, one 1 GiB line: %e s, %M KB peak RSS" "$B" parse-log "$D/big.log" > /dev/null
