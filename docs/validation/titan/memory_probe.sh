# The memory probe of 2026-12-04 (issue 17) on the lent H200, from the repository root with bin/titan
# (TorchTitan v0.2.2) and bin/wheels carried: bash docs/validation/titan/memory_probe.sh (it ran as
# bin/probe.sh, this same text); $OUT/probe.txt is docs/validation/h200-2026-12-04-titan4b/probe.txt.
set -u
S=/tmp/site; mkdir -p $S
for w in bin/wheels/*.whl; do python3 -m pip install -q --no-deps --no-index --target $S $w 2>&1 | tail -1; done
cp -r docs/validation/titan/datasets $S/
export PYTHONPATH=$PWD/bin/titan:$S
cd bin/titan
for run in "4B 4096 1" "4B 4096 2" "1.7B 2048 1" "1.7B 2048 2"; do
  echo "=== $run"
  timeout 150 python3 ../../docs/validation/titan/memory_probe.py $run 2>&1 | grep -v Warning | tail -80
done | tee $OUT/probe.txt
