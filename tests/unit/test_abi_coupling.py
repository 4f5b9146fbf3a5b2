"""The coupling warning follows the whole Requires-Dist graph of the stack, extras included."""

from __future__ import annotations

from stackctl.abi.check import Resolution, StackWheel, Where, coupling
from stackctl.wheels.scan import WheelScan


def _wheel(name: str, requires: tuple[str, ...] | None) -> StackWheel:
    return StackWheel(WheelScan(f"{name}-1.0-py3-none-linux_x86_64.whl", name, "1.0", ("linux_x86_64",), (), ()),
                      True, requires)


def _needs(wheel: str, provider: str, lib: str) -> Resolution:
    return Resolution(f"{wheel}-1.0-py3-none-linux_x86_64.whl", f"{wheel}/lib.so", lib, Where.RUNPATH, "",
                      provider_wheel=f"{provider}-1.0-py3-none-linux_x86_64.whl", provider_path=f"{provider}/{lib}")


def test_a_requirement_through_an_extra_of_another_distribution_counts() -> None:
    """torch declares cuda-toolkit[cublas]; cuda-toolkit requires nvidia-cublas only under that extra."""
    torch = _wheel("torch", ("cuda-toolkit[cublas,cudart]==13.0.2; platform_system == 'Linux'",))
    toolkit = _wheel("cuda_toolkit", ('nvidia-cublas==13.1.0.3; extra == "cublas"',
                                      'nvidia-cufft==12.0.0.61; extra == "cufft"'))
    cublas, cufft = _wheel("nvidia_cublas", ()), _wheel("nvidia_cufft", ())
    wheels = [torch, toolkit, cublas, cufft]
    assert coupling(wheels, [_needs("torch", "nvidia_cublas", "libcublas.so.13")]) == []
    # an extra torch does not ask for leads nowhere: cufft is not declared
    [warned] = coupling(wheels, [_needs("torch", "nvidia_cufft", "libcufft.so.12")])
    assert "needs libcufft.so.12 from nvidia_cufft, and declares no Requires-Dist leading to it" in warned.message


def test_a_wheel_that_declares_nothing_is_warned_and_an_unknown_one_is_not_judged() -> None:
    torch = _wheel("torch", ())
    [w] = coupling([_wheel("torchaudio", ()), torch], [_needs("torchaudio", "torch", "libc10.so")])
    assert "torchaudio-1.0-py3-none-linux_x86_64.whl needs libc10.so from torch, and declares no Requires-Dist" \
        in w.message
    assert coupling([_wheel("torchaudio", None), torch], [_needs("torchaudio", "torch", "libc10.so")]) == []
