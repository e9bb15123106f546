"""Ask Primus' own config loader what an experiment resolves to, and write its answers as JSON.

The judge for primus-tune's config engine (tests/primus_loader.rs compares `primus-tune show
EXP --json --all` with these answers key by key). For every experiment given, it runs what
`primus train pretrain` runs before any GPU is touched, on CPU, in one Python process:

  1. `load_primus_config(EXP)` then `get_module_config(cfg, "pre_trainer")`
     (primus/core/config/primus_config.py): the module's params after presets, `extends`,
     `${VAR:default}`, the model preset and the experiment's `overrides`;
  2. Megatron modules: `MegatronArgBuilder().update(params).finalize()`
     (primus/backends/megatron/argument_builder.py): Megatron-LM's argparse defaults at
     Primus' pinned Megatron-LM, overlaid with the params Megatron knows;
  3. Megatron modules: the `build_args` patch phase (`run_patches`, as PrimusRuntime does
     before logging "Final backend args (after patches)"), recording every argument a patch
     changed.

Nothing of Primus is copied or stubbed: its code is imported from the checkout given. The
one redirection: with --configs-root, Primus' PresetLoader (which finds `primus/configs` from
`primus.configs.models.__file__`) reads the presets of that folder instead (primus-tune's
bundled example, presets/examples). Run it through docs/validation/primus-loader.sh, which
sets up an empty environment (no PRIMUS_* variable: every `${VAR:default}` takes its default).

Output (one JSON object):
  primus: {commit, megatron_commit}      what was run
  megatron_defaults: {dest: value}       Megatron-LM's argparse defaults (parse_args([]))
  experiments: {path relative to --base: {
      framework,
      params: {dotted key: value},       the module params (nested sections flattened with
                                         dots; an empty section is kept as {})
      coerced: {key: value},             Megatron modules: builder values that differ from
                                         the params (enum arguments converted by argparse)
      patched: {key: {before, after}},   Megatron modules: what the build_args patches changed
                                         (no `before`: the patch added the key)
      injected: [key, ...],              Megatron modules: keys the builder sets from the
                                         torchrun environment (world_size, rank, local_rank)
      error: "..."                       instead of the above when Primus refuses the file
  }}
Paths under the scratch folder the loader runs in (the workspace `./output`) start with $CWD.
Values: JSON scalars and lists; an enum member is written as its name (`AttnBackend.auto` ->
"auto"); any other Python object as {"python": type name, "repr": repr(value)}.

Usage (see primus-loader.sh and docs/validation/README.md):
  python3 primus-loader.py --primus DIR [--commit SHA] [--megatron-commit SHA]
      [--configs-root DIR] [--megatron-defaults TSV] --base DIR --out FILE EXP.yaml ...
"""
import argparse
import copy
import enum
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace


def git_head(path):
    if not os.path.exists(os.path.join(path, ".git")):
        return ""
    r = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip()


def plain(v):
    """A JSON value for a Python value (see the module docstring)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else {"python": "float", "repr": repr(v)}
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, SimpleNamespace):
        v = vars(v)
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return {"python": type(v).__name__, "repr": repr(v)}


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = plain(v)
    return out


class Judge:
    def __init__(self):
        from primus.backends.megatron.argument_builder import _load_megatron_defaults

        self.defaults = _load_megatron_defaults()
        # The builder copies the cached defaults shallowly: checked unchanged at the end.
        self.pristine = copy.deepcopy(self.defaults)
        # The version PrimusRuntime hands the patches (some are gated on it).
        from primus.backends.megatron.megatron_adapter import MegatronAdapter

        self.version = MegatronAdapter().detect_backend_version()
        self.logger_ready = False

    def init_logger(self, cfg, module):
        # Patches log through Primus' logger; without it a patch stops at its first log line.
        if self.logger_ready:
            return
        from primus.core.runtime.logging import init_worker_logger

        init_worker_logger(primus_config=cfg._legacy, module_name="pre_trainer", module_config=module)
        self.logger_ready = True

    def megatron(self, cfg, module, answer):
        from primus.backends.megatron.argument_builder import MegatronArgBuilder
        from primus.core.patches import run_patches
        from primus.core.utils.yaml_utils import nested_namespace_to_dict

        params = nested_namespace_to_dict(module.params)
        args = MegatronArgBuilder().update(module.params).finalize()
        built = vars(args)
        answer["injected"] = ["world_size", "rank", "local_rank"]
        coerced = {}
        for k, v in built.items():
            if k in answer["injected"]:
                continue
            expected = params[k] if k in params else self.defaults[k]
            if type(v) is not type(expected) or v != expected:
                coerced[k] = plain(v)
        answer["coerced"] = coerced
        before = copy.deepcopy(built)
        self.init_logger(cfg, module)
        run_patches(
            backend="megatron",
            phase="build_args",
            backend_version=self.version,
            model_name=getattr(module, "model", None),
            module_name="pre_trainer",
            extra={
                "backend_args": args,
                "primus_config": cfg._legacy,
                "module_config": module,
                "runtime_state": None,
            },
        )
        after = vars(args)
        patched = {}
        for k in sorted(set(before) | set(after)):
            if k in before and k in after and type(before[k]) is type(after[k]) and before[k] == after[k]:
                continue
            patched[k] = {"after": plain(after.get(k))}
            if k in before:
                patched[k]["before"] = plain(before[k])
        answer["patched"] = patched

    def judge(self, exp):
        from primus.core.config.primus_config import get_module_config, load_primus_config
        from primus.core.utils.yaml_utils import nested_namespace_to_dict

        answer = {}
        try:
            cfg = load_primus_config(Path(exp))
            module = get_module_config(cfg, "pre_trainer")
            answer["framework"] = module.framework
            answer["params"] = flatten(nested_namespace_to_dict(module.params))
            if module.framework == "megatron":
                self.megatron(cfg, module, answer)
        except Exception as e:  # noqa: BLE001 - a refused file is an answer too
            return {"error": f"{type(e).__name__}: {e}"}
        return answer


def write_defaults(path, result):
    with open(path, "w") as f:
        f.write(
            f"# Megatron-LM {result['primus']['megatron_commit']} (the pin of Primus "
            f"{result['primus']['commit']}): argparse defaults as MegatronArgBuilder reads them, "
            "dest<TAB>JSON value (enum members by name); docs/validation/primus-loader.sh\n"
        )
        for k, v in result["megatron_defaults"].items():
            f.write(f"{k}\t{json.dumps(v, separators=(',', ':'))}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--primus", required=True, help="a Primus checkout (third_party/Megatron-LM at its pin)")
    ap.add_argument("--commit", default="", help="the Primus commit, when the checkout has no .git")
    ap.add_argument("--megatron-commit", default="", help="the Megatron-LM commit, likewise")
    ap.add_argument("--configs-root", help="read presets from DIR/primus/configs instead of Primus' own")
    ap.add_argument("--base", required=True, help="experiment paths are written relative to this folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--megatron-defaults", metavar="TSV",
                    help="also write Megatron's defaults as primus-tune ships them (dest<TAB>JSON)")
    ap.add_argument("experiments", nargs="+")
    a = ap.parse_args()

    primus = os.path.abspath(a.primus)
    megatron = os.path.join(primus, "third_party", "Megatron-LM")
    sys.path[:0] = [primus, megatron]
    experiments = [os.path.abspath(e) for e in a.experiments]
    base = os.path.abspath(a.base)
    out = os.path.abspath(a.out)
    if a.configs_root:
        import primus.configs.models as models

        models.__file__ = os.path.join(os.path.abspath(a.configs_root), "primus/configs/models/__init__.py")

    result = {
        "primus": {
            "commit": git_head(primus) or a.commit,
            "megatron_commit": git_head(megatron) or a.megatron_commit,
            "configs_root": os.path.relpath(os.path.abspath(a.configs_root), base) if a.configs_root else None,
        },
    }
    # The loader creates the experiment's output folder under its `workspace`: work elsewhere.
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        judge = Judge()
        result["megatron_defaults"] = {k: plain(v) for k, v in sorted(judge.defaults.items())}
        answers = {}
        for exp in experiments:
            answers[os.path.relpath(exp, base)] = judge.judge(exp)
        if judge.defaults != judge.pristine:
            raise SystemExit("Megatron's cached defaults changed while judging: answers are unsafe")
    # Paths a patch builds under the working folder name it as $CWD, the same on every run.
    if a.megatron_defaults:
        write_defaults(a.megatron_defaults, result)
    result["experiments"] = json.loads(json.dumps(answers).replace(json.dumps(scratch)[1:-1], "$CWD"))
    with open(out, "w") as f:
        json.dump(result, f, indent=0, separators=(",", ":"))
        f.write("\n")
    sys.stdout.flush()
    sys.stderr.write(f"{len(answers)} experiments judged, {sum('error' in x for x in answers.values())} refused\n")


if __name__ == "__main__":
    main()
