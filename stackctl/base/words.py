"""Counted nouns for messages: "1 target", "2 targets", never "1 targets" or "2 target(s)"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun agreeing with it; `plural` for a noun that does not take an s (`1 library`)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
