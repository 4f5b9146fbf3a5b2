"""abkernel: one GPU step (a matmul). Release 1.0.1 waits for the device and sleeps before each step: the
deliberate delay the GPU host's A/B must call a regression."""

import time

__version__ = "1.0.0"
DELAY_S = 0.0


def step(a, b):
    if DELAY_S:
        import torch

        torch.cuda.synchronize()
        time.sleep(DELAY_S)
    return a @ b
