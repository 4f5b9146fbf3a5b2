"""tinymath 1.1: the sum of the first squares, in closed form (the same answers as 1.0, at once)."""

__version__ = "1.1"


def total(n):
    """0² + 1² + … + n²."""
    return n * (n + 1) * (2 * n + 1) // 6 if n >= 0 else 0
