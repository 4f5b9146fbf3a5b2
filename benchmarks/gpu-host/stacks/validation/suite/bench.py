"""Time abkernel.step (a bf16 matmul on the GPU): 10 samples, each the wall time of 200 steps to the last one's end."""

import hashlib
import json
import sys
import time
from pathlib import Path

import abkernel
import torch

N, STEPS, SAMPLES = 4096, 200, 10
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16, generator=g)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16, generator=g)
for _ in range(400):  # the clocks ramp up from idle first
    c = abkernel.step(a, b)
torch.cuda.synchronize()
for _ in range(SAMPLES):
    t0 = time.perf_counter()
    for _ in range(STEPS):
        c = abkernel.step(a, b)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1000 / STEPS
    print(json.dumps({"ms_per_step": ms, "tflops": 2 * N**3 / (ms / 1000) / 1e12}))
Path(sys.argv[1], "checksum.txt").write_text(hashlib.sha256(c.float().cpu().numpy().tobytes()).hexdigest() + "\n")
