"""Line numbers for TOML key paths, so validation can say `file:line key.path`.

`tomllib` keeps no positions. Profiles are hand-written and shallow, so a line scan that tracks table
headers and `key =` lines is enough: every key path maps to the line that defines it, and a path that is
not written literally (a key inside an inline table) falls back to its nearest written ancestor. The body
of a multi-line string (a description) is text, never a header or a key, however it looks.
"""

from __future__ import annotations

import re

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def split_key(text: str) -> tuple[str, ...] | None:
    """Split a dotted TOML key (`a."b.c".d`) into parts; None when it is not a key."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return None
        if text[i] in "\"'":
            quote = text[i]
            end = text.find(quote, i + 1)
            if end < 0:
                return None
            parts.append(text[i + 1 : end])
            i = end + 1
        else:
            m = _BARE.match(text, i)
            if not m:
                return None
            parts.append(m.group(0))
            i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return tuple(parts)
        if text[i] != ".":
            return None
        i += 1


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Map every literally written key path to its 1-based line number."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    array_counts: dict[tuple[str, ...], int] = {}
    open_string: str | None = None  # the closing delimiter of a multi-line string still open
    for number, raw in enumerate(text.splitlines(), start=1):
        inside, open_string = open_string is not None, _strings_after(raw, open_string)
        line = raw.strip()
        if inside or not line or line.startswith("#"):
            continue
        if line.startswith("[["):
            path = split_key(line[2 : line.find("]]")]) if "]]" in line else None
            if path is not None:
                path = _within_arrays(path, array_counts)
                index = array_counts.get(path, 0)
                array_counts[path] = index + 1
                table = (*path, str(index))
                lines.setdefault(path, number)
                lines[table] = number
            continue
        if line.startswith("["):
            path = split_key(line[1 : line.find("]")]) if "]" in line else None
            if path is not None:
                path = _within_arrays(path, array_counts)
                table = path
                lines.setdefault(path, number)
            continue
        if "=" in line:
            key = split_key(_key_part(line))
            if key is not None:
                full = (*table, *key)
                for depth in range(len(table) + 1, len(full) + 1):
                    lines.setdefault(full[:depth], number)
    return lines


def _within_arrays(path: tuple[str, ...], counts: dict[tuple[str, ...], int]) -> tuple[str, ...]:
    """`[[trial.metric]]` after `[[trial]]` belongs to the latest trial: its path is trial.N.metric, with N that
    trial's index, as the parsed document nests it."""
    out: list[str] = []
    for part in path[:-1]:
        out.append(part)
        if tuple(out) in counts:
            out.append(str(counts[tuple(out)] - 1))
    return (*out, path[-1])


def _strings_after(line: str, open_string: str | None) -> str | None:
    """The delimiter (three double or three single quotes) of a multi-line string still open at the end of
    `line`, given the one open at its start; one-line strings and comments are skipped on the way."""
    i, n = 0, len(line)
    while i < n:
        if open_string is not None:
            if open_string == '"""' and line[i] == "\\":
                i += 2
                continue
            if line.startswith(open_string, i):
                i += 3
                while i < n and line[i] == open_string[0]:  # up to two quotes may end the body itself
                    i += 1
                open_string = None
                continue
            i += 1
            continue
        ch = line[i]
        if ch == "#":
            break
        if line.startswith('"""', i) or line.startswith("'''", i):
            open_string, i = line[i : i + 3], i + 3
            continue
        if ch in "\"'":
            i += 1
            while i < n and line[i] != ch:
                i += 2 if ch == '"' and line[i] == "\\" else 1
        i += 1
    return open_string


def _key_part(line: str) -> str:
    """The text before the first `=` that is not inside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return line[:i]
    return line


def locate(lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> int | None:
    """The line of `path`; of its first written key when only those are written (`[indexs.public]` writes
    `indexs` no line of its own); else of its nearest written ancestor."""
    if path not in lines:
        inside = [line for key, line in lines.items() if key[:len(path)] == path]
        if inside:
            return min(inside)
    for depth in range(len(path), 0, -1):
        found = lines.get(path[:depth])
        if found is not None:
            return found
    return None
