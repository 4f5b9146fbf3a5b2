"""Time tinymath.total over n = 0 … 499: 6 samples, each the best of 3 passes, as JSON lines of the time a
pass takes (work_ms) and its inverse (passes_per_s), one metric the inverse of the other; the answers into
OUT/answer.txt, which must be the same bytes on both stacks. Usage: python bench.py OUT

The time is the thread's CPU time: on a shared machine the wall clock also counts the slices other processes
take, which is the host's noise, not the library's speed."""

import json
import sys
import time
from pathlib import Path

import tinymath

for _ in range(6):
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        for n in range(500):
            tinymath.total(n)
        best = min(best, time.thread_time() - start)
    print(json.dumps({"work_ms": best * 1000, "passes_per_s": 1 / best}))
Path(sys.argv[1], "answer.txt").write_text(" ".join(str(tinymath.total(n)) for n in range(0, 500, 50)) + "\n")
