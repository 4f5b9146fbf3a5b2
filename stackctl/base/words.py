"""Counted nouns for messages: "1 target", "2 targets", never "1 targets" or "2 target(s)"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun agreeing with it; `plural` for a noun that does not take an s (`1 library`)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def did_you_mean(name: str, known: list[str]) -> str | None:
    """The nearest known names to a typo, as a hint (`did you mean torch-2.11-post2?`), or None."""
    import difflib

    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}?" if close else None
