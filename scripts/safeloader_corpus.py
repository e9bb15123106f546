#!/usr/bin/env python3
"""Builds tests/fixtures/safeloader/corpus.jsonl: YAML inputs with PyYAML SafeLoader's verdict.

Primus reads an experiment as `yaml.load(open(path), Loader=yaml.SafeLoader)`: the file is
decoded as UTF-8 (a bad byte raises before YAML sees it) and then loaded by the pure-Python
SafeLoader. `lint` must refuse exactly what that refuses; tests/safeloader_agreement.rs checks
each input of the corpus against the verdict recorded here.

The inputs are hand-written edge cases (directives, tags, merge keys, anchors, tabs, BOMs,
non-UTF-8, timestamps, unhashable keys ...) and seeded mutations of short windows of the
bundled example YAML (so the fixture stays small). Deterministic: the same PyYAML gives the
same file.

Usage: python3 scripts/safeloader_corpus.py [--count N] [--out FILE]
"""

import argparse
import base64
import json
import pathlib
import random
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent

HAND = [
    # directives
    "%YAML 1.1\n---\na: 1\n",
    "%YAML 1.2\n---\na: 1\n",
    "%YAML 1.3\n---\na: 1\n",
    "%YAML 2.0\n---\na: 1\n",
    "%YAML 0.9\n---\na: 1\n",
    "%YAML 1.1\n%YAML 1.1\n---\na: 1\n",
    "%YAML 1.1\na: 1\n",
    "%YAML\n---\na: 1\n",
    "%YAML 1\n---\na: 1\n",
    "%YAML 1.x\n---\na: 1\n",
    "%FOO bar\n---\na: 1\n",
    "%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n",
    "%TAG !e! tag:example.com,2000:\n---\na: 1\n",
    "%TAG !e! tag:example.com,2000:\n%TAG !e! tag:other,2000:\n---\na: 1\n",
    "%TAG !! tag:yaml.org,2002:\n---\na: !!int 1\n",
    "%TAG !! tag:example.com,2000:\n---\na: !!int 1\n",
    "a: !e!x 1\n",
    "---\na: 1\n...\n",
    "a: 1\n---\nb: 2\n",
    "---\n---\n",
    "--- a\n",
    "...\n",
    # tags
    "a: !!python/object:os.system {}\n",
    "a: !!python/name:os.system ''\n",
    "a: !!python/tuple [1, 2]\n",
    "a: !local 1\n",
    "a: ! 1\n",
    "a: !<tag:yaml.org,2002:str> 1\n",
    "a: !<tag:yaml.org,2002:int> 1\n",
    "a: !<tag:example.com,2000:x> 1\n",
    "a: !<!> 1\n",
    "a: !!str 5\n",
    "a: !!int '5'\n",
    "a: !!int x\n",
    "a: !!int ''\n",
    "a: !!int 0x1f\n",
    "a: !!float x\n",
    "a: !!float 1\n",
    "a: !!float .inf\n",
    "a: !!bool maybe\n",
    "a: !!bool yes\n",
    "a: !!bool ''\n",
    "a: !!null x\n",
    "a: !!binary aGVsbG8=\n",
    "a: !!binary '!!!'\n",
    "a: !!binary aGVsbG8\n",
    "a: !!timestamp 2001-12-14\n",
    "a: !!timestamp nope\n",
    "a: !!seq x\n",
    "a: !!seq [1]\n",
    "a: !!map x\n",
    "a: !!map {b: 1}\n",
    "a: !!map [1]\n",
    "a: !!seq {b: 1}\n",
    "a: !!set {x: null}\n",
    "a: !!set [1]\n",
    "a: !!set x\n",
    "a: !!omap [{x: 1}, {y: 2}]\n",
    "a: !!omap [x]\n",
    "a: !!omap {x: 1}\n",
    "a: !!omap [{x: 1, y: 2}]\n",
    "a: !!pairs [{x: 1}]\n",
    "a: !!pairs [x]\n",
    "a: !!str [1]\n",
    "a: !!str {b: 1}\n",
    "a: !!merge x\n",
    "a: !!value x\n",
    "a: !!yaml x\n",
    "!!map\na: 1\n",
    "!!seq\na: 1\n",
    "!!str\na: 1\n",
    # merge keys
    "b: &b {x: 1}\nc:\n  <<: *b\n",
    "c:\n  <<: 1\n",
    "c:\n  <<:\n",
    "c:\n  <<: x\n",
    "c:\n  <<: [1]\n",
    "c:\n  <<: []\n",
    "c:\n  <<: {}\n",
    "c:\n  <<: {x: 1}\n",
    "c:\n  <<: [{x: 1}, {y: 2}]\n",
    "c:\n  <<: [{x: 1}, 2]\n",
    "c:\n  <<: [[{x: 1}]]\n",
    "b: &b 1\nc:\n  <<: *b\n",
    "b: &b [1]\nc:\n  <<: *b\n",
    "b: &b [{x: 1}]\nc:\n  <<: *b\n",
    "b: &b {x: 1}\nc:\n  <<: [*b, *b]\n",
    "c:\n  '<<': 1\n",
    "c:\n  \"<<\": 1\n",
    "c:\n  !!merge <<: 1\n",
    "c:\n  !!merge x: {y: 1}\n",
    "c:\n  !!str <<: 1\n",
    "c: {<<: 1}\n",
    "c: {<<: {x: 1}, x: 2}\n",
    "<<: {x: 1}\n",
    "<<: 5\n",
    "c:\n  <<: {x: 1}\n  <<: {y: 1}\n",
    "c:\n  <<: {x: 1}\n  <<: 2\n",
    "c:\n  <<: !!map {x: 1}\n",
    "c:\n  <<: !!set {x: null}\n",
    "c:\n  <<: !!omap [{x: 1}]\n",
    "c:\n  <<: {x: {<<: 3}}\n",
    "c:\n  <<: {[1]: 2}\n",
    # anchors and aliases
    "a: &x 1\nb: &x 2\n",
    "a: &x 1\nb: &x 2\nc: *x\n",
    "a: &x [1]\nb: &y [2]\n",
    "a: &x {b: &x 1}\n",
    "a: *x\n",
    "a: &x 1\nb: *y\n",
    "b: *x\na: &x 1\n",
    "a: &x\nb: *x\n",
    "a: &x &y 1\n",
    "&a a: 1\nb: *a\n",
    "a: &x [*x]\n",
    "a: &x {b: *x}\n",
    "*a : 1\n",
    "a: &x 1\n*x : 2\n",
    "a: &x [1]\n*x : 2\n",
    "a: &x {b: 1}\n? *x\n: 2\n",
    "a: &\n",
    "a: &x!!str 1\n",
    # unhashable and complex keys
    "? [1, 2]\n: x\n",
    "? {a: 1}\n: x\n",
    "? a\n: x\n",
    "? |\n  a\n: x\n",
    "{[1]: 2}\n",
    "[1, 2]: x\n",
    "a: {[1]: 2}\n",
    "? !!set {x: null}\n: 1\n",
    "? !!binary aGVsbG8=\n: 1\n",
    "? 2001-12-14\n: 1\n",
    "? null\n: 1\n",
    "? 1.5\n: 1\n",
    "1: 2\n1: 3\n",
    "a: 1\na: 2\n",
    "a: 1\nA: 2\n",
    "{a: 1, a: 2}\n",
    # timestamps
    "a: 2001-12-14\n",
    "a: 2001-13-14\n",
    "a: 2001-02-30\n",
    "a: 2001-1-1\n",
    "a: 2001-12-14t21:59:43.10-05:00\n",
    "a: 2001-12-14 21:59:43.10 -5\n",
    "a: 2001-12-14 25:59:43\n",
    "a: 2001-12-14 21:61:43\n",
    "a: 2001-12-14 21:59:61\n",
    "a: 2001-12-14T21:59:43Z\n",
    "a: 2001-12-14T21:59:43+25:00\n",
    "a: 2001-12-14T21:59:43.1234567\n",
    "a: 0000-01-01\n",
    "a: 9999-12-31\n",
    "a: '2001-13-14'\n",
    "a: 2001-13-14x\n",
    "2001-13-14: 1\n",
    "- 2001-00-01\n",
    "a: 2001-12-14 21:59:43 +25\n",
    "a: 2001-12-14 21:59:43 -13:30\n",
    "a: 2001-12-14 21:59:43 +24\n",
    "a: 2001-12-14 21:59:43 +23:60\n",
    # numbers and sexagesimals
    "a: 1:20\n",
    "a: 190:20:30\n",
    "a: 1:60\n",
    "a: 0b102\n",
    "a: 0o17\n",
    "a: 08\n",
    "a: 0x_\n",
    "a: 1_000\n",
    "a: 1__0\n",
    "a: +.inf\n",
    "a: 1.0e+5\n",
    "a: 1e5\n",
    "a: _1\n",
    "a: 0b\n",
    "a: 0x\n",
    "a: ._\n",
    "a: 1:_0\n",
    "a: 1.0e+\n",
    # tabs
    "a:\t1\n",
    "a: 1\t\n",
    "a: \t1\n",
    "\ta: 1\n",
    "a:\n\tb: 1\n",
    "a:\n  b:\t1\n",
    "- \t1\n",
    "-\t1\n",
    "a: [1,\t2]\n",
    "a: {b:\t1}\n",
    "a: 'x\ty'\n",
    "a: |\n\tx\n",
    "a: |\n  x\n\ty\n",
    "a: \"x\\ty\"\n",
    "a: 1 \t# c\n",
    "a: 1\t# c\n",
    "# c\t\na: 1\n",
    "\t\na: 1\n",
    "a: 1\n\t\n",
    "? a\n:\t1\n",
    # BOM and encodings
    "\ufeffa: 1\n",
    "\ufeff\ufeffa: 1\n",
    "a: 1\n\ufeffb: 2\n",
    "a: x\ufeffy\n",
    "\ufeff---\na: 1\n",
    "a: 1\n\ufeff",
    # special characters
    "a: x\x1by\n",
    "a: x\x7fy\n",
    "a: x\x85y\n",
    "a: x\u2028y\n",
    "a: x\u2029y\n",
    "a: x\ufffey\n",
    "a: x\ud7ffy\n",
    "a: \"\\e\"\n",
    "a: \"\\x1b\"\n",
    "a: \"\\u00e9\"\n",
    "a: \"\\U0001F600\"\n",
    "a: \"\\q\"\n",
    "a: \"\\x4\"\n",
    "a: \"\\/\"\n",
    "a: \"\\\t\"\n",
    "a: \"\\ \"\n",
    "a: \"\\N\\_\\L\\P\"\n",
    "a: x\r\nb: y\r\n",
    "a: x\rb: y\r",
    "a: 1\n\x00",
    # block scalars
    "a: |\n  x\n",
    "a: |-\n  x\n",
    "a: |+\n  x\n",
    "a: |2\n   x\n",
    "a: |0\n  x\n",
    "a: |10\n  x\n",
    "a: |-+\n  x\n",
    "a: |1-\n x\n",
    "a: >\n  x\n  y\n",
    "a: |\n x\n  y\n",
    "a: |\n  x\n y\n",
    "a: |\n   \n  x\n",
    "a: | # c\n  x\n",
    "a: |#c\n  x\n",
    # flow
    "a: [1, 2,]\n",
    "a: [1,, 2]\n",
    "a: {b: 1,}\n",
    "a: {b: 1,, c: 2}\n",
    "a: [b: 1]\n",
    "a: [? b : 1]\n",
    "a: {b}\n",
    "a: {b, c}\n",
    "a: {? b}\n",
    "a: [a, b]c\n",
    "a: {\"b\":1}\n",
    "a: {b:1}\n",
    "a: [b:1]\n",
    "a: [1]]\n",
    "a: [1\n",
    "a: [\n1]\n",
    "a: [\n  1\n]\n",
    "a: {\nb: 1}\n",
    "[a, b]\n",
    "{a: 1}\n",
    "{a: 1} x\n",
    "a: -\n",
    "a: - 1\n",
    "- a\n- b: 1\n  c: 2\n",
    "- a\nb: 1\n",
    "a: 1\n- b\n",
    # plain scalars with indicators
    "a: b: c\n",
    "a: b #c\n",
    "a: b#c\n",
    "a: @x\n",
    "a: `x\n",
    "a: %x\n",
    "a: x%\n",
    "a: ,x\n",
    "a: x,\n",
    "a: ]\n",
    "a: }\n",
    "a: ?x\n",
    "a: ? x\n",
    "a: :x\n",
    "a: -x\n",
    "a: x:\n",
    "a: 'x''y'\n",
    "a: 'x\n  y'\n",
    "a: \"x\n  y\"\n",
    "a: 'x\n",
    "a: \"x\n",
    "a: x\n  y\n",
    "a: x\n y: z\n",
    "a:\n  - 1\n - 2\n",
    "a:\n  b: 1\n   c: 2\n",
    "a:\n   b: 1\n  c: 2\n",
    "a:\n- 1\n- 2\n",
    "a: 1\n  b: 2\n",
    "a\n",
    "a:b\n",
    ":\n",
    ": a\n",
    "? \n",
    "? \n: a\n",
    "x: 1\n? \n: 2\n",
    "? # c\n: a\n",
    "-\n",
    "- \n- - \n",
    "#\n",
    "",
    "\n",
    "~\n",
    "a: ~\n",
    "key with spaces: 1\n",
    "\"a\\nb\": 1\n",
    "? \"a\\nb\"\n: 1\n",
    "a: ${X:1}\n",
    "a: ${X\n",
    "a: '${X:1}'\n",
]

# Pieces a mutation inserts: YAML constructs where SafeLoader and strict YAML 1.2 readers part.
SNIPPETS = [
    "&a ", "&a ", "*a", "*b", "*nope", "<<: 1", "<<: *a", "<<: [*a, 1]", "<<:", "<<: x",
    "%YAML 2.0\n---\n", "%YAML 1.1\n---\n", "%YAML 1.2\n%YAML 1.2\n---\n", "%TAG !e! x:\n---\n",
    "!!python/object:os.system ", "!!python/name:x ", "!e!x ", "!local ", "!!str ", "!!int ",
    "!!float ", "!!bool ", "!!binary ", "!!map ", "!!seq ", "!!set ", "!!omap ", "!!timestamp ",
    "? ", "[1]: ", "{a: 1}: ", "2001-13-40", "2001-12-14", "1:20", "0x1F", "\t", "\ufeff",
    "\x1b", "\x85", "\u2028", "|", ">", "|-\n", "'", "\"", "\\", "---\n", "...\n", "- ",
    ": ", ",", "[", "]", "{", "}", "#", "%", "@", "`", "~", "\r", "é",
]


def cyclic(v, path=()):
    """Whether v contains itself (an alias inside its own anchor's node)."""
    if isinstance(v, (dict, list)):
        if any(v is p for p in path):
            return True
        items = v.values() if isinstance(v, dict) else v
        return any(cyclic(x, path + (v,)) for x in items)
    return False


def loads(data: bytes):
    """Primus' read: UTF-8 text, then SafeLoader. (verdict, error's first line).

    One step past SafeLoader: a recursive structure (`a: &x [*x]`) loads, but Primus' env
    substitution walks the whole tree and never ends (RecursionError), so Primus refuses it.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return "refuse", f"UnicodeDecodeError: {e}"
    try:
        value = yaml.load(text, Loader=yaml.SafeLoader)
    except RecursionError as e:
        return None, f"RecursionError: {e}"
    except Exception as e:  # noqa: BLE001 — any exception is Primus failing to load the file
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return "refuse", f"{type(e).__name__}: {first}"
    if cyclic(value):
        return "refuse", "RecursionError: a recursive alias (Primus' env substitution)"
    return "accept", ""


def sources():
    base = ROOT / "presets" / "examples"
    return sorted(p for p in base.rglob("*.yaml"))


def window(rng, lines):
    n = rng.randint(2, 12)
    start = rng.randrange(0, max(1, len(lines) - n))
    return lines[start:start + n]


def mutate(rng, text):
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        pos = rng.randint(0, len(text))
        if op < 0.55:
            text = text[:pos] + rng.choice(SNIPPETS) + text[pos:]
        elif op < 0.7:
            end = min(len(text), pos + rng.randint(1, 6))
            text = text[:pos] + text[end:]
        elif op < 0.8:
            ls = text.split("\n")
            i = rng.randrange(len(ls))
            ls.insert(i, ls[i])
            text = "\n".join(ls)
        elif op < 0.9:
            ls = text.split("\n")
            i = rng.randrange(len(ls))
            ls[i] = " " * rng.choice([1, 2, 4]) + ls[i] if rng.random() < 0.5 else ls[i].lstrip()
            text = "\n".join(ls)
        else:
            # anchor-heavy rewrite: anchor a value and alias it elsewhere (redefined anchors)
            ls = text.split("\n")
            i = rng.randrange(len(ls))
            if ": " in ls[i]:
                k, v = ls[i].split(": ", 1)
                ls[i] = f"{k}: &a {v}"
            ls.insert(rng.randrange(len(ls) + 1), f"{' ' * rng.choice([0, 2, 4])}z: *a")
            text = "\n".join(ls)
    return text


def corpus(count, seed):
    out = [("hand", s.encode("utf-8", "surrogatepass")) for s in HAND]
    # non-UTF-8 bytes: Primus' open() refuses them before YAML sees them
    out += [
        ("hand", b"a: \xff\n"),
        ("hand", b"a: caf\xe9\n"),
        ("hand", b"\xfe\xff\x00a\x00:\x00 \x001\x00\n"),
        ("hand", b"\xff\xfea\x00:\x00 \x001\x00\n\x00"),
        ("hand", b"a: \xc3\n"),
        ("hand", b"a: \xed\xa0\x80\n"),
        ("hand", b"# \x80\na: 1\n"),
    ]
    rng = random.Random(seed)
    texts = {p: p.read_text().split("\n") for p in sources()}
    names = sorted(texts)
    seen = set(b for _, b in out)
    while len(out) < count:
        p = rng.choice(names)
        text = mutate(rng, "\n".join(window(rng, texts[p])) + "\n")
        data = text.encode("utf-8", "surrogatepass")
        if data in seen:
            continue
        seen.add(data)
        out.append((f"mutation of {p.relative_to(ROOT)}", data))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=2400)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--out", default=str(ROOT / "tests/fixtures/safeloader/corpus.jsonl"))
    a = ap.parse_args()
    rows = []
    for i, (origin, data) in enumerate(corpus(a.count, a.seed)):
        verdict, error = loads(data)
        if verdict is None:
            continue
        row = {"id": i, "origin": origin, "verdict": verdict}
        try:
            row["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            row["base64"] = base64.b64encode(data).decode()
        if error:
            row["error"] = error
        rows.append(row)
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True) + "\n")
    refused = sum(r["verdict"] == "refuse" for r in rows)
    print(f"{len(rows)} inputs, {refused} refused by SafeLoader (PyYAML {yaml.__version__})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
