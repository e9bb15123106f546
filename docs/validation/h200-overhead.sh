#!/usr/bin/env bash
# Telemetry overhead on the lent NVIDIA H200 (device tool), all samplers side by side in one call:
#   B=bin/primus-tune WHEELS=bin/whl OUT=$OUT bash docs/validation/h200-overhead.sh
# B: a stripped release build carried over. WHEELS: the nvitop, nvidia-ml-py and psutil wheels
# (pip download nvitop nvidia-ml-py --no-deps; psutil --only-binary=:all: --abi abi3), installed
# offline into a private folder. docs/validation/cpu_of.py measures each process tree.
set -u
B=${B:-target/release/primus-tune}
OUT=${OUT:-/tmp/pt-overhead}
mkdir -p "$OUT"
export PATH=/usr/local/nvidia/bin:$PATH
M="python3 docs/validation/cpu_of.py --warm 5"
T=60

if [ -d "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --target /tmp/nvitop-env "$WHEELS"/*.whl 2>&1 | tail -2
fi
NVITOP_VER=$(PYTHONPATH=/tmp/nvitop-env python3 -c 'import nvitop; print(nvitop.__version__)' 2>&1)
echo "nvitop: $NVITOP_VER"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc; grep -c '^cpu[0-9]' /proc/stat

echo "== $T s at 2 Hz, side by side"
$M --smaps $T monitor-nvml -- "$B" monitor --json --interval 500 > "$OUT/ovh_monitor.json" &
$M $T monitor-nvml-scan-2hz -- "$B" monitor --json --interval 500 --process-interval 500 > "$OUT/ovh_monitor_scan2hz.json" &
$M $T monitor-host-only -- "$B" monitor --json --interval 500 --backend host > "$OUT/ovh_host.json" &
$M --smaps $T nvidia-smi-query -- nvidia-smi \
    --query-gpu=utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm --format=csv -lms 500 \
    > "$OUT/ovh_nvsmi.json" &
$M $T nvidia-smi-dmon-1s -- nvidia-smi dmon -d 1 > "$OUT/ovh_dmon.json" &
PYTHONPATH=/tmp/nvitop-env $M --pty $T nvitop-0.5s -- python3 -m nvitop --interval 0.5 > "$OUT/ovh_nvitop.json" &
wait
cat "$OUT"/ovh_*.json

echo "== sample cost (µs) from the monitor's own measurement, 10 Hz for 10 s"
"$B" monitor --json --interval 100 --duration 10 > "$OUT/sample_cost.jsonl"
python3 - "$OUT/sample_cost.jsonl" <<'PY' | tee "$OUT/sample_cost.txt"
import json, statistics, sys
v = [json.loads(l)["sample_us"] for l in open(sys.argv[1]) if l.strip()]
print(json.dumps({"samples": len(v), "median_us": statistics.median(v),
                  "p90_us": sorted(v)[int(0.9 * len(v))], "max_us": max(v)}))
PY
