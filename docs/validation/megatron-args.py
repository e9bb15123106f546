"""Print upstream Megatron-LM's command-line arguments as primus-tune ships them
(presets/megatron-lm-args.tsv): one line per option string, tab-separated
    dest  option  kind  nargs
kind is store (takes a value), true (store_true: sets dest True), false (store_false: sets dest
False) or const (store_const). Run with Megatron-LM's dependencies (torch) importable:
    MEGATRON_PATH=/path/to/Megatron-LM python3 docs/validation/megatron-args.py > presets/megatron-lm-args.tsv
The parser is the one pretrain_gpt.py builds (add_megatron_arguments), without optional plug-ins.
"""
import argparse
import os
import subprocess
import sys

root = os.environ["MEGATRON_PATH"]
sys.path.insert(0, root)
from megatron.training.arguments import add_megatron_arguments  # noqa: E402

parser = argparse.ArgumentParser(allow_abbrev=False)
add_megatron_arguments(parser)
# An exported tree has no .git of its own: MEGATRON_COMMIT names its commit.
commit = os.environ.get("MEGATRON_COMMIT", "")
if not commit and os.path.isdir(os.path.join(root, ".git")):
    commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
print(f"# upstream Megatron-LM {commit or 'unknown commit'}: "
      "dest, option, kind, nargs (docs/validation/megatron-args.py)")
for a in parser._actions:
    name = type(a).__name__
    kind = {"_StoreTrueAction": "true", "_StoreFalseAction": "false",
            "_StoreConstAction": "const", "_HelpAction": None}.get(name, "store")
    if kind is None:
        continue
    nargs = "" if a.nargs is None else str(a.nargs)
    for o in a.option_strings:
        if o.startswith("--"):
            print(f"{a.dest}\t{o}\t{kind}\t{nargs}")
