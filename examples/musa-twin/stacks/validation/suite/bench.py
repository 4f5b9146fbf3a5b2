"""torchada.dispatch timed: 6 samples, each the best of 5 calls (the thread's CPU time), as JSON lines."""
import json
import time

import torchada

for _ in range(6):
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        torchada.dispatch(40000)
        best = min(best, time.thread_time() - start)
    print(json.dumps({"dispatch_ms": best * 1000}))
