"""`[image.app]`'s pure checks: build argument names and values, and the project's Dockerfile taking the stack
image through its argument in a FROM. Text in, problems out; the loader reads the files."""

from __future__ import annotations

import io
import re

# A build argument is kept in the image's history (`docker history` shows `|1 NAME=VALUE`): a name like one
# of these says the value is a secret, which must reach the build another way.
CREDENTIAL_ARG = re.compile(r"pass(word|wd)?|token|secret|auth|credential|api_?key|private_?key", re.IGNORECASE)
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]*@")
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_arg_name(name: object) -> str | None:
    """Why `name` cannot be a build argument's name (None when it can)."""
    if not isinstance(name, str) or not _ARG_NAME.fullmatch(name):
        return f"{str(name)[:80]!r} is not a build argument name (letters, digits and _)"
    return None


def credential_in(value: str) -> bool:
    """A URL carrying user:password@ (or a token@) anywhere in the value."""
    return bool(_USERINFO.search(value))


def _uses(image: str, arg: str) -> bool:
    return image in (f"${arg}", f"${{{arg}}}") or image.startswith((f"${arg}@", f"${{{arg}}}@"))


def dockerfile_problems(text: str, stack_arg: str, target: str | None) -> list[tuple[int | None, str]]:
    """(line, message) for each reason the Dockerfile cannot be built FROM the stack image: no FROM takes
    `stack_arg`, the argument is not declared before the first FROM (where a FROM reads it), or the target
    stage is missing. Parsed by dockerfile-parse: continuations, comments and parser directives as the
    builder reads them."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")), env_replace=False)
    structure = parser.structure
    froms = [(i["startline"] + 1, i["value"].split()) for i in structure if i["instruction"] == "FROM"]
    if not froms:
        return [(None, "has no FROM instruction: the project's Dockerfile builds FROM ${" + stack_arg + "}")]
    first_from = froms[0][0]
    declared = any(i["instruction"] == "ARG" and i["startline"] + 1 < first_from
                   and i["value"].split("=", 1)[0].strip() == stack_arg for i in structure)
    problems: list[tuple[int | None, str]] = []
    using = [(line, words) for line, words in froms
             if any(_uses(w, stack_arg) for w in words if not w.startswith("--"))]
    if not using:
        problems.append((first_from, f"no FROM uses ${{{stack_arg}}}: stackctl passes the stack image in that "
                         f"build argument; write `ARG {stack_arg}` above the first FROM and "
                         f"`FROM ${{{stack_arg}}}` where the stack's stages were"))
    elif not declared:
        problems.append((using[0][0], f"FROM ${{{stack_arg}}} needs `ARG {stack_arg}` above the first FROM "
                         "(a FROM reads only arguments declared before it)"))
    if target is not None:
        stages = {words[words.index(w) + 1].lower() for _, words in froms for w in words
                  if w.lower() == "as" and words.index(w) + 1 < len(words)}
        if target.lower() not in stages:
            problems.append((None, f"no stage named {target!r} (image.app.target); stages: "
                             + (", ".join(sorted(stages)) or "none named")))
    return problems
