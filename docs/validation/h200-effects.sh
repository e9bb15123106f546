#!/usr/bin/env bash
# Issue 17 on the lent H200 (device tool): a sweep that starts from the knob effects of the
# workspace's earlier studies (app/sweep/effects.rs, tune/search/effects.rs).
# Upstream Megatron-LM (commit d98e8a64, bin/megatron, never committed) through the built-in
# `megatron-local` profile, the 12-layer x 1536 GPT of h200-history.sh, space
# docs/validation/spaces/gpt-mbs-h200.yaml (micro batch 4, 8, 16), the current micro batch 16.
#   1. study fx-with: a workspace that holds the 9 finished megatron-local studies the earlier
#      H200 validations recorded (their committed databases: micro batch 4/8/16 twice, micro
#      batch 8/16/32 x recompute seven times, two of those under a noisy neighbour), studies
#      only (no trials, so no launch history: the priors are the only difference);
#   2. study fx-without: the same sweep in an empty workspace.
# One device call, from the repository root, bin/ carried (the release binary and Megatron-LM):
#   OUT=$OUT bash docs/validation/h200-effects.sh
set -u
G=${G:-/tmp/fx}
LIMIT=${LIMIT:-280}
export PATH=/usr/local/nvidia/bin:$PATH
rm -rf "$G"; mkdir -p "$G/work"
cp bin/primus-tune "$G/primus-tune"
cp -r bin/megatron "$G/megatron"
cp -r presets/examples "$G/work/ex"
B=$G/primus-tune
export MEGATRON_PATH=$G/megatron
W=$G/work
export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data XDG_STATE_HOME=$W/state
EXP=$W/ex/experiments/llama3_8B-BF16-pretrain.yaml
SHAPE=(--set seq_length=2048 --set max_position_embeddings=2048 --set global_batch_size=32
       --set transformer_impl=local --set use_flash_attn=false
       --set num_layers=12 --set hidden_size=1536 --set ffn_hidden_size=6144
       --set num_attention_heads=12 --set num_query_groups=12 --set micro_batch_size=16)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
"$B" --version >> "$OUT/gpu.txt" 2>&1
# The earlier studies: the newest database's schema, its trials removed, the studies of every
# committed megatron-local database inserted (named after the validation they come from).
mkdir -p "$W/ws-with"
python3 - "$W/ws-with/trials.db" docs/validation/h200-2026-12-03-decisions/trials-c.db \
  docs/validation/h200-2026-12-02-history/trials-ab.db \
  docs/validation/h200-2026-12-02-history/trials-cd.db \
  docs/validation/h200-2026-12-02-trimmed/trials-c.db \
  docs/validation/h200-2026-12-02-race/alone-trials-c.db \
  docs/validation/h200-2026-12-02-race/noisy-trials-c.db \
  docs/validation/h200-2026-12-02-noisy/trials-c.db > "$OUT/seeded.txt" <<'PY'
import json, shutil, sqlite3, sys
dst, srcs = sys.argv[1], sys.argv[2:]
shutil.copy(srcs[0], dst)
d = sqlite3.connect(dst)
for t in ("samples", "memory_reports", "iterations", "acknowledgements", "trials", "studies"):
    d.execute(f"DELETE FROM {t}")
for src in srcs:
    s = sqlite3.connect(src)
    tag = src.split("/")[2] + "/" + src.split("/")[3].removesuffix(".db")
    for name, created, cfg, kind, space, notes in s.execute(
            "SELECT name, created_at, config_path, kind, space, notes FROM studies"):
        rec = json.loads(notes)
        if rec["profile"] != "megatron-local":
            continue
        d.execute("INSERT INTO studies (name, created_at, config_path, kind, space, notes) "
                  "VALUES (?, ?, ?, ?, ?, ?)", (f"{tag}:{name}", created, cfg, kind, space, notes))
        ms = [(c["overrides"].get("micro_batch_size"), c["overrides"].get("recompute_granularity"),
               round(c.get("step_ms") or c["median_ms"], 1)) for c in rec["candidates"]
              if c.get("step_ms") or c.get("median_ms")]
        print(f"{tag}:{name}", rec["space"], ms)
d.commit()
d.execute("VACUUM")
PY
cat "$OUT/seeded.txt"
for part in with without; do
  export PRIMUS_TUNE_WORKSPACE=$W/ws-$part
  args=(sweep "$EXP" "${SHAPE[@]}" --space docs/validation/spaces/gpt-mbs-h200.yaml
        --profile megatron-local --gpus 1 --name "fx-$part")
  echo "\$ PRIMUS_TUNE_WORKSPACE=ws-$part primus-tune ${args[*]}" > "$OUT/sweep-$part.txt"
  t0=$(date +%s)
  timeout -k 15 -s TERM "$LIMIT" "$B" "${args[@]}" >> "$OUT/sweep-$part.txt" 2>&1
  echo "exit $? after $(( $(date +%s) - t0 )) s" >> "$OUT/sweep-$part.txt"
  "$B" studies show "fx-$part" --log --config "$EXP" > "$OUT/log-$part.txt" 2>&1
  "$B" trials --all > "$OUT/trials-$part.txt" 2>&1
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
    "$W/ws-$part/trials.db" "$OUT/trials-$part.db" 2>> "$OUT/sweep-$part.txt"
  cat "$OUT/sweep-$part.txt"
done
