import abkernel
import torch


def test_device_is_there():
    assert torch.cuda.is_available()


def test_step_is_a_matmul():
    a = torch.randn(256, 256, device="cuda")
    b = torch.randn(256, 256, device="cuda")
    torch.testing.assert_close(abkernel.step(a, b).cpu(), a.cpu() @ b.cpu(), atol=1e-3, rtol=1e-3)


def test_bf16_step():
    a = torch.ones(128, 128, device="cuda", dtype=torch.bfloat16)
    assert abkernel.step(a, a)[0, 0].item() == 128
