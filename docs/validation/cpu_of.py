#!/usr/bin/env python3
"""Run a command for a fixed time and report the CPU time and peak RSS of its process tree.

Usage: cpu_of.py [--pty] [--smaps] [--warm S] SECONDS LABEL -- COMMAND [ARGS...]

Output goes to /dev/null (with --pty: to a 120x40 pseudo-terminal that this script drains, for
full-screen programs). At the deadline the tree's root gets SIGTERM, then SIGKILL. (Not SIGINT: a
shell starts background jobs with SIGINT ignored, and that is inherited.)

Why not getrusage(RUSAGE_CHILDREN): a child's ru_maxrss includes the forking Python's own RSS
(Linux records the old address space's peak at exec), which inflated every figure by ~10 MB.
So this reads the tree's own counters from procfs while it runs:
- peak RSS: the largest VmHWM of any process in the tree (the kernel's high-water mark since exec);
- CPU: the per-thread run time in ns of the tree (/proc/PID/task/*/schedstat; user+sys ticks of
  /proc/PID/stat where that is missing), in all and between WARM seconds and the end: the steady
  rate without start-up.
With --smaps, the mappings holding the most resident memory at the end are listed too.
Prints one JSON line.
"""
import json
import os
import pty
import signal
import struct
import sys
import time

args = sys.argv[1:]
use_pty = "--pty" in args
warm = 5.0
if "--warm" in args:
    warm = float(args[args.index("--warm") + 1])
cmd = args[args.index("--") + 1:]
head = [a for a in args[: args.index("--")] if a not in ("--pty", "--smaps")]
if "--warm" in head:
    i = head.index("--warm")
    del head[i : i + 2]
seconds, label = float(head[0]), head[1]
TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2 :].split()


def tree(root):
    """The root and all its descendants (by ppid)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                kids.setdefault(int(stat_fields(d)[1]), []).append(int(d))
            except (OSError, IndexError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def run_ns(pid):
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
    except OSError:
        return None
    return total


def ticks(pid):
    try:
        f = stat_fields(pid)
        # utime, stime, cutime, cstime (the last two: waited-for children)
        return sum(int(x) for x in f[11:15])
    except (OSError, IndexError):
        return 0


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def smaps_top(pid, n=12):
    """The mappings with the most resident memory: [(rss_kb, name)]."""
    rows, cur = [], None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                parts = line.split()
                if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                    cur = parts[5] if len(parts) > 5 else "[anon]"
                elif parts[0] == "Rss:" and cur is not None:
                    rows.append((int(parts[1]), cur))
    except OSError:
        return []
    agg = {}
    for kb, name in rows:
        agg[name] = agg.get(name, 0) + kb
    return sorted(((kb, name) for name, kb in agg.items()), reverse=True)[:n]


start = time.time()
if use_pty:
    import fcntl
    import termios

    pid, master = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.environ.setdefault("TERM", "xterm-256color")
        os.execvp(cmd[0], cmd)
    os.set_blocking(master, False)
else:
    devnull = os.open(os.devnull, os.O_WRONLY)
    pid = os.posix_spawnp(cmd[0], cmd, os.environ, file_actions=[
        (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)])
    master = None

peak_kb, rss_kb, top, at_warm, last, end_ticks = 0, 0, None, None, None, 0
exited = False
while True:
    now = time.time() - start
    if master is not None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        done = pid
    if done == pid:
        exited = True
        break
    members = tree(pid)
    peak_kb = max([peak_kb] + [status_kb(p, "VmHWM") for p in members])
    rss_kb = sum(status_kb(p, "VmRSS") for p in members)
    top = smaps_top(members[-1]) if "--smaps" in sys.argv else None
    ns = [run_ns(p) for p in members]
    if all(n is not None for n in ns):
        sample = (now, sum(ns))
        if at_warm is None and now >= warm:
            at_warm = sample
        last = sample
    end_ticks = sum(ticks(p) for p in members)
    if now >= seconds:
        break
    time.sleep(0.05 if master is not None else 0.25)

wall = time.time() - start
if not exited:
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

# Run time in ns when readable (exact), else clock ticks (10 ms steps).
total_ms = max(1000 * end_ticks / TICK, last[1] / 1e6 if last else 0)
steady = None
if at_warm and last and last[0] > at_warm[0]:
    steady = round((last[1] - at_warm[1]) / 1e6 / (last[0] - at_warm[0]), 3)
print(json.dumps({
    "label": label,
    "seconds": round(wall, 2),
    "exited_early": exited,
    "cpu_ms": round(total_ms, 2),
    "cpu_ms_per_s": round(total_ms / wall, 3),
    "steady_cpu_ms_per_s": steady,
    "cpu_ms_at_warm": round(at_warm[1] / 1e6, 2) if at_warm else None,
    "peak_rss_mb": round(peak_kb / 1024, 1),
    "end_rss_mb": round(rss_kb / 1024, 1),
    **({"smaps_top_kb": top} if top is not None else {}),
}))
