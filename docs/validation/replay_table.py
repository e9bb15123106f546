#!/usr/bin/env python3
"""Turn stored trials into a replay table for `primus-tune bench-replay`.

    python3 docs/validation/replay_table.py GRID.db --knobs micro_batch_size,recompute_granularity \
        --capacity-gib 139.8 > table.json

Every trial of the database is one recorded candidate, named by its values of --knobs (a knob a
trial does not set is recorded as null, the config's default). `per_iter_ms` are the trial's
iteration times as its log printed them, in order; `startup_s` is the trial's wall time minus
the sum of those (launch, start-up and shutdown, as measured); `peak_memory_bytes` the peak the
trial reported; `oom` whether it failed out of GPU memory. Two trials of one candidate: the
longer one is kept. A trial stopped before its last iteration (a run limit) is left out, unless
--keep-stopped: then its iterations so far are recorded, as long as they reach past the warm-up.
When a knob sets the batch a step processes (TorchTitan's training.local_batch_size with
global_batch_size -1), --per-samples N --batch-knob KEY [--gpus G] scale every iteration time to
the time of N samples (× N / (KEY × G)), as a sweep compares such candidates by the same work.
--also KEY=VALUE@WHEN=IS records a setting every trial with WHEN=IS ran with although the trials
did not set it (the experiment did), as a sweep's group knob names it (TorchTitan's
activation_checkpoint.selective_ac_option=op@activation_checkpoint.mode=selective); VALUE is
read as JSON where it is JSON (model.converters=["quantize.linear.float8"]), else as a string.
"""
import argparse
import json
import sqlite3
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db")
    ap.add_argument("--knobs", required=True, help="comma-separated flags naming a candidate")
    ap.add_argument("--capacity-gib", type=float, required=True, help="GPU memory, GiB")
    ap.add_argument("--keep-stopped", action="store_true",
                    help="record a stopped trial's iterations so far (at least 6)")
    ap.add_argument("--per-samples", type=float, help="scale step times to this many samples")
    ap.add_argument("--batch-knob", help="the knob giving the samples per GPU and step")
    ap.add_argument("--gpus", type=float, default=1.0, help="GPUs of the grid (data parallel)")
    ap.add_argument("--pipeline-stages", type=int,
                    help="the grid's pipeline-parallel stages (1 on one GPU): the search's batch "
                         "rule applies only in one stage; left out of the table when not given")
    ap.add_argument("--also", action="append", default=[],
                    help="KEY=VALUE@WHEN=IS: add KEY=VALUE to the candidates with WHEN=IS")
    a = ap.parse_args()
    also = []
    for spec in a.also:
        kv, _, cond = spec.partition("@")
        k, _, v = kv.partition("=")
        ck, _, cv = cond.partition("=")
        if not (k and ck):
            ap.error(f"--also {spec}: expected KEY=VALUE@WHEN=IS")
        try:  # a JSON value (a list: model.converters=["quantize.linear.float8"]), else a string
            v = json.loads(v)
        except ValueError:
            pass
        also.append((k, v, ck, cv))
    if (a.per_samples is None) != (a.batch_knob is None):
        ap.error("--per-samples and --batch-knob go together")
    knobs = a.knobs.split(",")
    con = sqlite3.connect(a.db)
    rows = con.execute(
        "select id, overrides, status, failure_class, wall_s, peak_mem_gib from trials order by id"
    ).fetchall()
    best = {}
    for tid, overrides, status, failure, wall_s, peak_gib in rows:
        given = {o["key"]: o["value"] for o in json.loads(overrides)}
        cand = {k: given.get(k) for k in knobs}
        for k, v, ck, cv in also:
            if str(cand.get(ck)) == cv:
                cand[k] = v
        iters = [
            ms
            for (ms,) in con.execute(
                "select elapsed_ms from iterations where trial_id = ? order by iteration", (tid,)
            )
            if ms is not None
        ]
        oom = failure == "oom"
        kept = a.keep_stopped and status == "stopped" and len(iters) >= 6
        if kept:
            print(f"trial {tid}: {status} ({failure}) after {len(iters)} iterations, kept",
                  file=sys.stderr)
        if status != "completed" and not oom and not kept:
            print(f"trial {tid}: {status} ({failure}), left out", file=sys.stderr)
            continue
        startup_s = round(max((wall_s or 0.0) - sum(iters) / 1000.0, 0.0), 2)
        if a.per_samples is not None:
            batch = cand.get(a.batch_knob)
            if batch is None:
                sys.exit(f"trial {tid}: no {a.batch_knob} among --knobs: cannot scale its steps")
            scale = a.per_samples / (float(batch) * a.gpus)
            iters = [round(ms * scale, 3) for ms in iters]
        row = {
            "overrides": cand,
            "per_iter_ms": iters,
            "peak_memory_bytes": round(peak_gib * 2**30) if peak_gib is not None else None,
            "oom": oom,
            "startup_s": startup_s,
        }
        key = json.dumps(cand, sort_keys=True)
        if key not in best or len(iters) > len(best[key]["per_iter_ms"]):
            best[key] = row
    table = {"capacity_bytes": round(a.capacity_gib * 2**30), "candidates": list(best.values())}
    if a.pipeline_stages is not None:
        table["pipeline_stages"] = a.pipeline_stages
    json.dump(table, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
