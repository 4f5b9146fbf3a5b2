"""What an ABI check may take as given at run time without an image inventory: the device driver's
libraries (run-time providers, one built-in set per vendor, which a profile extends) and the manylinux /
musllinux policies (auditwheel's own policy data, read through its API, so the tables follow the PEP 600
policies auditwheel ships instead of a copy that ages here).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import cache

# The libraries the device driver installs on the host and a container runtime mounts into the container
# (the NVIDIA container toolkit's driver list; MUSA's runtime the same way): never in a wheel, never in an
# image, present wherever the device is.
BUILTIN: dict[str, tuple[str, ...]] = {
    "nvidia": ("libcuda.so*", "libcudadebugger.so*", "libnvidia-*.so*", "libnvcuvid.so*", "libnvoptix.so*",
               "libEGL_nvidia.so*", "libGLX_nvidia.so*", "libGLESv2_nvidia.so*", "libGLESv1_CM_nvidia.so*"),
    "musa": ("libmusa.so*", "libmtml.so*", "libmusa_driver*.so*", "libsrv_um_MUSA.so*"),
}

VENDOR_NAMES = {"nvidia": "NVIDIA driver", "musa": "MUSA driver"}


@dataclass(frozen=True)
class ProviderSet:
    vendor: str
    globs: tuple[str, ...]

    @property
    def title(self) -> str:
        return VENDOR_NAMES.get(self.vendor, f"{self.vendor} run time")

    def match(self, soname: str) -> str | None:
        return next((g for g in self.globs if fnmatch.fnmatchcase(soname, g)), None)


def provider_sets(vendors: tuple[str, ...],
                  extra: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> tuple[ProviderSet, ...]:
    added = dict(extra)
    return tuple(ProviderSet(v, (*BUILTIN.get(v, ()), *added.get(v, ()))) for v in vendors)


@dataclass(frozen=True)
class Policy:
    """One manylinux/musllinux policy: the libraries it lets a wheel take from the system and the highest
    symbol version of each family it allows."""

    name: str  # "manylinux_2_28"
    libraries: frozenset[str]
    versions: tuple[tuple[str, frozenset[str]], ...]  # (family, versions: "2.28", "3.4.25", ...)
    priority: int = 0  # auditwheel's: higher is older, so more widely compatible

    def allows(self, version: str) -> bool | None:
        """GLIBC_2.29 under manylinux_2_28: False; a family the policy does not speak for: None."""
        family, _, number = version.partition("_")
        got = dict(self.versions).get(family)
        if got is None or not number:
            return None
        return number in got


@cache
def _policies(libc: str, arch: str) -> tuple[Policy, ...]:
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    try:
        machine = Architecture(arch)
    except ValueError:
        return ()
    kind = Libc.MUSL if libc == "musl" else Libc.GLIBC
    out = []
    musl = ("musllinux_1_1", "musllinux_1_2") if kind is Libc.MUSL else (None,)
    seen: set[str] = set()
    for m in musl:
        for p in WheelPolicies(libc=kind, arch=machine, musl_policy=m):
            name = p.name.removesuffix(f"_{arch}")
            if name in seen or name == "linux":
                continue
            seen.add(name)
            out.append(Policy(name, frozenset(p.whitelist),
                              tuple(sorted((f, frozenset(v)) for f, v in p.symbol_versions.items())), p.priority))
            for alias in p.aliases:
                out.append(Policy(alias.removesuffix(f"_{arch}"), out[-1].libraries, out[-1].versions, p.priority))
    return tuple(out)


def policy_for(name: str, arch: str) -> Policy | None:
    """"manylinux_2_28" (or an alias, "manylinux2014") for `arch`; a tag between two policies
    (manylinux_2_25) holds to the newest policy older than it, with glibc's versions up to its own; None
    when there is none."""
    name = name.removesuffix(f"_{arch}")
    libc = "musl" if name.startswith("musllinux") else "glibc"
    policies = _policies(libc, arch)
    exact = next((p for p in policies if p.name == name), None)
    if exact is not None or (want := _numbers(name)) is None:
        return exact
    older = [(n, p) for p in policies if (n := _numbers(p.name)) is not None and n <= want]
    if not older or libc != "glibc":
        return max(older, key=lambda x: x[0])[1] if older else None
    (_, minor), base = max(older, key=lambda x: x[0])
    # PEP 600: manylinux_2_25 promises glibc 2.25: the older policy's libraries, glibc's versions up to the tag's
    versions = dict(base.versions)
    versions["GLIBC"] = versions.get("GLIBC", frozenset()) | {f"{want[0]}.{m}" for m in range(minor + 1, want[1] + 1)}
    return Policy(name, base.libraries, tuple(sorted(versions.items())), base.priority)


def _numbers(name: str) -> tuple[int, int] | None:
    parts = name.split("_")
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return int(parts[1]), int(parts[2])
    return None


# The dynamic loader itself: every glibc system has it, and auditwheel never lists it among a policy's
# libraries because it is the program interpreter rather than a library a wheel links.
LOADERS = ("ld-linux*.so.*", "ld64.so.*", "ld-musl-*.so.1")


def system_library(policy: Policy, name: str) -> bool:
    return name in policy.libraries or any(fnmatch.fnmatchcase(name, g) for g in LOADERS)


def policy_names() -> list[str]:
    return sorted({p.name for libc in ("glibc", "musl") for p in _policies(libc, "x86_64")})


def tag_policy(platforms: tuple[str, ...], arch: str | None) -> Policy | None:
    """The policy a wheel's own platform tags claim: of several (manylinux_2_27 and _2_28), the oldest, which
    is the strongest claim the tags make."""
    if arch is None:
        return None
    found = [p for t in platforms if t.startswith(("manylinux", "musllinux")) and (p := policy_for(t, arch))]
    return max(found, key=lambda p: p.priority, default=None)
