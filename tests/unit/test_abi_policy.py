"""The baseline without an inventory: auditwheel's manylinux/musllinux policies, read through its API."""

from __future__ import annotations

from stackctl.profile.runtime import policy_for, policy_names, system_library, tag_policy


def test_a_wheels_own_tags_claim_the_oldest_of_its_policies() -> None:
    p = tag_policy(("manylinux_2_27_x86_64", "manylinux_2_28_x86_64"), "x86_64")
    assert p is not None and p.name == "manylinux_2_27"
    assert p.allows("GLIBC_2.27") and p.allows("GLIBC_2.28") is False
    assert p.allows("LIBFOO_1.0") is None  # a family the policy does not speak for
    assert {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"} <= p.libraries
    assert system_library(p, "ld-linux-x86-64.so.2") and not system_library(p, "libcuda.so.1")
    assert tag_policy(("linux_x86_64",), "x86_64") is None


def test_aliases_musl_and_tags_between_two_policies() -> None:
    legacy = policy_for("manylinux2014_x86_64", "x86_64")
    assert legacy is not None and legacy.allows("GLIBC_2.17") and legacy.allows("GLIBC_2.18") is False
    musl = policy_for("musllinux_1_2", "x86_64")
    assert musl is not None and "libc.musl-x86_64.so.1" in musl.libraries
    # no manylinux_2_25 policy: manylinux_2_24's libraries, glibc's versions up to 2.25 as PEP 600 says
    between = policy_for("manylinux_2_25_x86_64", "x86_64")
    assert between is not None and between.name == "manylinux_2_25"
    assert between.allows("GLIBC_2.25") and between.allows("GLIBC_2.26") is False
    assert "manylinux_2_28" in policy_names() and "musllinux_1_2" in policy_names()
