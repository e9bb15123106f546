#!/usr/bin/env python3
"""Run a command for a fixed time and report its CPU time (user + sys) and peak RSS.

Usage: cpu_of.py SECONDS LABEL -- COMMAND [ARGS...]
The command's output goes to /dev/null; it is sent SIGTERM at the deadline (then SIGKILL).
(Not SIGINT: a shell starts background jobs with SIGINT ignored, and that is inherited.)
Prints one JSON line: label, seconds, user_s, sys_s, cpu_ms_per_s, max_rss_mb.
"""
import json
import resource
import signal
import subprocess
import sys
import time

seconds = float(sys.argv[1])
label = sys.argv[2]
cmd = sys.argv[sys.argv.index("--") + 1:]
start = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    p.wait(timeout=seconds)
except subprocess.TimeoutExpired:
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
wall = time.time() - start
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "label": label,
    "seconds": round(wall, 2),
    "user_s": round(ru.ru_utime, 3),
    "sys_s": round(ru.ru_stime, 3),
    "cpu_ms_per_s": round(1000 * (ru.ru_utime + ru.ru_stime) / wall, 3),
    "max_rss_mb": round(ru.ru_maxrss / 1024, 1),
}))
