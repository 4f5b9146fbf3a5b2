"""Input read within bounds: the size any file stackctl parses is held to, and the one way stackctl parses
TOML (profiles, validation plans, PEP 751 lock files, uv's output).

`tomllib` does work quadratic in the parts of one dotted key (`x.a.a.a...`: 100,000 parts in a 200 KB file
take it over 10 s and 3 GB), recurses into nested arrays and inline tables, and converts an integer of
more digits than Python allows with a `ValueError` it does not wrap. A scan refuses such a file before
the parser sees it, in a few regular-expression passes: it takes out strings and comments as TOML
defines them, then looks in what is left for a run between two key-ending characters (`=`, `,`,
brackets, braces, a newline) holding too many dots, brackets and braces nested too deep, and a decimal
number too long. It parses nothing else: any other mistake is the parser's to report, in its own words.

Every bound is far above what a real file holds (a profile's deepest key has four parts; a PEP 751 file
nests four deep; a lock of a thousand pins is under 2 MB) and keeps the parser's cost linear in the
file's size.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

from stackctl.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MAX_BYTES = 8 << 20
MAX_KEY_PARTS = 64
MAX_NESTING = 64
# the longest decimal integer `int()` converts (0: no limit, as before Python 3.11)
MAX_DIGITS: int = getattr(sys, "get_int_max_str_digits", lambda: 0)()


class TomlError(InputError):
    """A file that is not TOML, or TOML beyond a bound; `line` is 1-based where known."""

    def __init__(self, origin: str, line: int | None, reason: str) -> None:
        self.origin, self.line, self.reason = origin, line, reason
        super().__init__(f"{origin}:{line}: {reason}" if line else f"{origin}: {reason}")


# A string of each of TOML's four kinds, or a comment, found left to right as the parser finds them. A quote
# that opens no string takes the rest of the file: the parser stops there too, and says why. Each string is
# matched as runs of plain characters between its escapes (or quotes), and the runs are possessive where
# Python has them (3.11): the matcher then keeps no state per character of a long string, which took it a
# gigabyte for an 8 MB one.
_RUN = "*+" if sys.version_info >= (3, 11) else "*"
_SKIP = re.compile(
    # multi-line, basic then literal: up to two quotes of the string may end it
    rf'"""[^\\"]{_RUN}(?:(?:\\[\s\S]|""?(?!"))[^\\"]{_RUN}){_RUN}""""?"?'
    rf"|'''[^']{_RUN}(?:''?(?!')[^']{_RUN}){_RUN}''''?'?"
    rf'|"[^"\\\n]{_RUN}(?:\\.[^"\\\n]{_RUN}){_RUN}"'  # basic: an escaped quote does not end it
    r"|'[^'\n]*'"  # literal
    r"|#[^\n]*"
    r"|[\"'][\s\S]*")
_ENDS = re.escape("=,\n[]{}")  # what ends a key
_LONG_KEY = re.compile(rf"(?:\.[^.{_ENDS}]*){{{MAX_KEY_PARTS}}}")  # that many dots with no end of a key between
_KEY_END = re.compile(f"[{_ENDS}]")
# A number too long for Python to convert to or from decimal: a decimal integer of more than MAX_DIGITS digits
# (not a float's, which `float` reads whatever its length), or a hexadecimal, octal or binary one of as large a
# value, which parses but which any message or record writing it in decimal could not.
_LONG_NUMBER = re.compile(rf"(?<![A-Za-z0-9_.])(?:0[xob])?[0-9A-Fa-f_]{{{MAX_DIGITS * 3 // 4},}}")
_DIGITS_OF = {"0x": (re.compile("[0-9A-Fa-f_]*"), math.log10(16)), "0o": (re.compile("[0-7_]*"), math.log10(8)),
              "0b": (re.compile("[01_]*"), math.log10(2))}
_DECIMAL = re.compile("[0-9_]*")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_RUN = re.compile(r"[\[{]+|[\]}]+")
_ROUND = str.maketrans("{}", "[]")


def _bare(text: str) -> str:
    """`text` with each string and each comment one `S`: what is left is keys, values and punctuation."""
    return _SKIP.sub("S", text)


def _original(text: str, at: int) -> int:
    """The offset in `text` of offset `at` of `_bare(text)`."""
    shift = 0
    for m in _SKIP.finditer(text):
        if m.start() - shift >= at:
            break
        shift += m.end() - m.start() - 1
    return at + shift


def _first_too_deep(bare: str, bound: int = MAX_NESTING) -> int | None:
    """Where the brackets and braces of `bare` first nest more than `bound` deep (a closer that closes nothing
    counts for nothing), or None."""
    depth = 0
    for m in _BRACKET_RUN.finditer(bare):
        run = m.end() - m.start()
        if m.group()[0] not in "[{":
            depth = max(depth - run, 0)
        elif depth + run > bound:
            return m.start() + bound - depth
        else:
            depth += run
    return None


def _too_deep(bare: str) -> bool:
    """Whether the brackets and braces of `bare` nest more than MAX_NESTING deep. A pass that takes out the
    innermost pairs (`[]`) lowers the deepest nesting by one and leaves the other depths as they were: passes
    go on while each takes out an eighth or more of the brackets, so the loop above is left at most one run
    in eight to count, however the brackets alternate."""
    b = _NOT_BRACKET.sub("", bare).translate(_ROUND)
    passes = 0
    while passes < MAX_NESTING and "[]" in b:
        b, before, passes = b.replace("[]", ""), b, passes + 1
        if len(b) > len(before) * 7 // 8:
            break
    return _first_too_deep(b, MAX_NESTING - passes) is not None


def _decimal_digits(bare: str, at: int) -> int:
    """How many decimal digits the integer written at `at` has (0 for a float)."""
    if (base := _DIGITS_OF.get(bare[at:at + 2])) is not None:
        run = base[0].match(bare, at + 2)
        assert run is not None  # the pattern matches the empty string
        return math.ceil(len(run.group().replace("_", "").lstrip("0")) * base[1])
    run = _DECIMAL.match(bare, at)
    assert run is not None
    return 0 if bare[run.end():run.end() + 1] in (".", "e", "E") else len(run.group().replace("_", ""))


def _excess(bare: str) -> tuple[int, str] | None:
    """Where in `bare` (a text without strings and comments) a bound is first exceeded, and which."""
    for m in _LONG_NUMBER.finditer(bare) if MAX_DIGITS else ():
        if (digits := _decimal_digits(bare, m.start())) > MAX_DIGITS:
            return m.start(), f"a number of {digits} digits; at most {MAX_DIGITS}"
    if (dots := _LONG_KEY.search(bare)) is not None:
        start = max(bare.rfind(c, 0, dots.start()) for c in "=,\n[]{}") + 1
        end = after.start() if (after := _KEY_END.search(bare, dots.end())) else len(bare)
        return start, f"a key of {bare.count('.', start, end) + 1} parts; at most {MAX_KEY_PARTS}"
    if _too_deep(bare):
        return _first_too_deep(bare) or 0, f"arrays or inline tables nested more than {MAX_NESTING} deep"
    return None


def too_large(text: str) -> str | None:
    """How far `text` is over MAX_BYTES (as UTF-8), or None."""
    if len(text) > MAX_BYTES // 4 and (size := len(text.encode("utf-8", "surrogatepass"))) > MAX_BYTES:
        return f"{size:,} bytes; at most {MAX_BYTES >> 20} MiB"
    return None


def beyond_bounds(text: str) -> tuple[int | None, str] | None:
    """The line and the bound a TOML text exceeds, or None when the parser may have it."""
    if (size := too_large(text)) is not None:
        return None, size
    if (found := _excess(_bare(text))) is None:
        return None
    return text.count("\n", 0, _original(text, found[0])) + 1, found[1]


def read_toml(text: str, origin: str) -> dict[str, Any]:
    """Parse `text` (the file `origin` names) within the bounds above; TomlError naming the file, the line
    where known, and the bound or the parser's own words otherwise."""
    if (beyond := beyond_bounds(text)) is not None:
        raise TomlError(origin, beyond[0], beyond[1])
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or a conversion the scan did not foresee
        line = re.search(r"line (\d+)", str(exc))
        raise TomlError(origin, int(line.group(1)) if line else None, f"malformed TOML: {exc}") from None
    except RecursionError:
        raise TomlError(origin, None, "malformed TOML: arrays or tables nested too deeply") from None
    return data
