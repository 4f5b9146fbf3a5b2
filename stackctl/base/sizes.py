"""Sizes for people, in one unit system everywhere: binary (KiB, MiB, GiB), as the size caps are set and as
the progress bars, CI lines, messages and the report count bytes."""

from __future__ import annotations


def human_size(n: int | float) -> str:
    """`512 B`, `1.5 KiB`, `3.9 GiB`."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable: GiB ends the loop")
