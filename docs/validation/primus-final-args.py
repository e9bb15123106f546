#!/usr/bin/env python3
"""Compares `primus-tune show EXP --json --all` with the arguments real Primus printed.

Primus logs, before Megatron validates them, "Final backend args (after patches): (N parameters)"
and one `key : value (type)` line per argument (log_dict_aligned in
primus/core/utils/module_utils.py; ../shared/research/primus-on-h200.md §4). This reads that
block from a Primus log (console or per-rank file, ANSI colours and loguru prefixes allowed),
and prints, for every key both sides have, whether the values agree, the keys a patch changed
first (the ones show names a `patch` for, and those Primus' build_args patches are known to
touch), then a count. Exit status: 0 when every compared key agrees, 1 otherwise.

Usage: primus-final-args.py PRIMUS_LOG SHOW_JSON
"""

import ast
import json
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The loguru prefix Primus writes before each message: `[...][rank-0/1][INFO] [---file.py:N] : `.
PREFIX = re.compile(r"^.*?\]\s*:\s")
LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s(.*)\s\(([A-Za-z_][A-Za-z0-9_.]*)\)\s*$")
# Keys the build_args patches of Primus fd1eeabb touch (primus/backends/megatron/patches).
PATCHED = {
    "sequence_parallel", "tokenizer_type", "iterations_to_skip", "vocab_size", "data_path",
    "train_data_path", "valid_data_path", "test_data_path", "wandb_project", "wandb_exp_name",
    "wandb_save_dir", "save", "tensorboard_dir", "moe_layer_freq", "logging_level",
}


def final_args(path):
    """The key → (text, type) lines of the last "Final backend args" block of a log."""
    block, inside = {}, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = ANSI.sub("", raw.rstrip("\n"))
            if "Final backend args" in line:
                block, inside = {}, True
                continue
            if not inside:
                continue
            body = PREFIX.sub("", line, count=1) if "] : " in line or "]: " in line else line
            m = LINE.match(body)
            if m:
                block[m.group(1)] = (m.group(2).strip(), m.group(3))
            elif block:
                inside = False
    return block


def value(text, kind):
    """A printed Python value as JSON would hold it."""
    if kind == "NoneType":
        return None
    if kind == "bool":
        return text == "True"
    if kind in ("int", "float", "list", "tuple", "dict"):
        try:
            v = ast.literal_eval(text)
            return list(v) if isinstance(v, tuple) else v
        except (ValueError, SyntaxError):
            return text
    if "." in kind or kind[:1].isupper():  # an enum: `AttnBackend.auto`
        return text.split(".")[-1]
    return text


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (a == b and type(a) is type(b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        return a == b or a.split(".")[-1] == b.split(".")[-1]
    return a == b


# Set by MegatronArgBuilder from the torchrun environment at run time, not by the config: `show`
# leaves local_rank unset (tests/primus_loader.rs names the same class).
RUNTIME = {"world_size", "rank", "local_rank"}


def main():
    log, show = sys.argv[1], sys.argv[2]
    primus = final_args(log)
    if not primus:
        print(f"{log}: no 'Final backend args' block")
        return 2
    with open(show, encoding="utf-8") as f:
        rows = {r["name"]: r for r in json.load(f)}
    both = sorted(set(primus) & set(rows))
    touched = [k for k in both if rows[k].get("patch") or k in PATCHED]
    wrong = 0
    print(f"Primus printed {len(primus)} arguments; show lists {len(rows)}; {len(both)} in both")
    print("\nkeys Primus' patches touch:")
    for k in touched:
        p = value(*primus[k])
        ok = same(rows[k].get("value"), p)
        patch = (rows[k].get("patch") or {}).get("id", "-")
        print(f"  {'ok  ' if ok else 'DIFF'} {k}: primus {p!r}, show {rows[k].get('value')!r} (patch {patch})")
    diffs = []
    for k in both:
        if not same(rows[k].get("value"), value(*primus[k])):
            diffs.append(k)
    runtime = [k for k in diffs if k in RUNTIME]
    diffs = [k for k in diffs if k not in RUNTIME]
    wrong = len(diffs)
    print(f"\nall keys in both: {len(both) - wrong - len(runtime)} agree, {wrong} differ, "
          f"{len(runtime)} set at run time by torchrun ({', '.join(runtime) or 'none'})")
    for k in runtime:
        print(f"  run-time {k}: primus {value(*primus[k])!r}, show {rows[k].get('value')!r}")
    for k in diffs:
        print(f"  DIFF {k}: primus {value(*primus[k])!r}, show {rows[k].get('value')!r}")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
