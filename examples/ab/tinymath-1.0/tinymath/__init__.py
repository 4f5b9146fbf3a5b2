"""tinymath 1.0: the sum of the first squares, term by term."""

__version__ = "1.0"


def total(n):
    """0² + 1² + … + n²."""
    return sum(i * i for i in range(n + 1))
