"""Image tags derived from pins, and Docker's reference grammar."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from stackctl.base.words import did_you_mean

if TYPE_CHECKING:
    from stackctl.profile.model import Stack

# Docker's distribution/reference grammar.
TAG_RE = re.compile(r"[\w][\w.-]{0,127}")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
REPOSITORY_RE = re.compile(rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_DIGEST_RE = re.compile(r"[a-z0-9]+:[0-9a-f]{32,}")


def check_image_ref(ref: str) -> None:
    """`ref` is `[HOST[:PORT]/]NAME[:TAG][@DIGEST]` (or an engine's image id) as Docker reads it; InputError
    (exit 2) otherwise, in the one wording every command that takes an image reference uses."""
    from stackctl.base.imageref import parse_image_ref
    from stackctl.errors import InputError

    parsed = parse_image_ref(ref)
    repository = f"{parsed.host}/{parsed.repository}" if parsed.host else parsed.repository
    tag, digest = parsed.tag, parsed.digest or ""
    first = repository.partition("/")[0]
    # Only a host (a dot, a port or localhost) may hold capitals; Docker reads `Upper/x` as a path.
    if (REPOSITORY_RE.fullmatch(repository) and (parsed.host is not None or first == first.lower())
            and (tag is None or TAG_RE.fullmatch(tag)) and (not digest or _DIGEST_RE.fullmatch(digest))):
        return
    raise InputError(f"{ref!r} is not an image reference ([HOST[:PORT]/]NAME[:TAG][@DIGEST], names in lowercase)")


class TagTemplateError(ValueError):
    pass


def sanitize(text: str) -> str:
    """Every character outside `[A-Za-z0-9_.-]` becomes `_` (so `+musa5.2.0` reads `_musa5.2.0`)."""
    return _UNSAFE.sub("_", text)


class _Pins(Mapping[str, str]):
    def __init__(self, pins: Mapping[str, str]) -> None:
        self._pins = {canonicalize_name(k): v for k, v in pins.items()}

    def __getitem__(self, name: str) -> str:
        try:
            return self._pins[canonicalize_name(name)]
        except KeyError:
            hint = did_you_mean(canonicalize_name(name), list(self._pins))
            raise TagTemplateError(f"{{pins[{name}]}} names no pin of this stack"
                                   + (f" ({hint})" if hint else "")) from None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._pins)

    def __len__(self) -> int:
        return len(self._pins)


MAX_TEMPLATE = 512
_FIELD = re.compile(r"(?P<root>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<pin>[^\[\]{}]+)\])?")


def template_fields(template: str) -> list[str]:
    """The field names of a tag template; a field is `{name}` or `{pins[NAME]}` and nothing more.

    A format spec (`{python:>999999999}`), a conversion (`!r`) or attribute and index access into a value
    would let a profile ask for gigabytes of padding or poke at Python objects: they are refused here.
    """
    if len(template) > MAX_TEMPLATE:
        raise TagTemplateError(f"template longer than {MAX_TEMPLATE} characters")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TagTemplateError(f"malformed template: {exc}") from None
    fields = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if conversion is not None or spec:
            raise TagTemplateError(f"{{{name}...}}: format specs and conversions (`:` and `!`) are not allowed "
                                   "in a tag template")
        if name == "":
            raise TagTemplateError("positional fields `{}` are not allowed; name a variable")
        m = _FIELD.fullmatch(name)
        if m is None or (m.group("pin") is not None and m.group("root") != "pins"):
            raise TagTemplateError(f"{{{name}}}: a field is a name or pins[NAME], no attribute or index access")
        fields.append(name)
    return fields


def render_tag(template: str, *, stack: str, python: str, pins: Mapping[str, str],
               variables: Mapping[str, str]) -> str:
    """Fill the template, sanitize, and enforce Docker's tag grammar."""
    fields: dict[str, object] = {**variables, "stack": stack, "python": python, "pins": _Pins(pins)}
    for name in template_fields(template):
        root = re.split(r"\[", name, maxsplit=1)[0]  # template_fields checked the shape
        if root not in fields:
            known = ", ".join(sorted(k for k in fields if k != "pins"))
            raise TagTemplateError(f"unknown field {{{name}}} (known: {known}, pins[NAME])")
        if root == "pins" and "[" not in name:
            raise TagTemplateError("{pins} alone is not a value; write {pins[NAME]}")
        if root != "pins" and "[" in name:
            raise TagTemplateError(f"{{{name}}}: only pins[NAME] takes an index")
    try:
        rendered = template.format_map(fields)
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        raise TagTemplateError(f"cannot render: {exc}") from None
    tag = sanitize(rendered)
    if not TAG_RE.fullmatch(tag):
        why = "longer than 128 characters" if len(tag) > 128 else "must start with a letter, digit or _"
        raise TagTemplateError(f"renders to an invalid Docker tag {tag!r}: {why}")
    return tag


def check_repository(repository: str) -> str | None:
    """None when `repository` is a valid Docker repository name, else what is wrong."""
    if not REPOSITORY_RE.fullmatch(repository):
        return (f"{repository!r} is not a valid repository (lowercase path components, "
                "optional registry host[:port]/ prefix, no tag)")
    if len(repository) > 255:
        return "repository name longer than 255 characters"
    return None


def stack_tag(stack: Stack) -> str:
    """The image tag of a validated profile (TagTemplateError when it has no image table or the template
    does not render)."""
    if stack.image is None:
        raise TagTemplateError("the profile has no image table")
    return render_tag(stack.image.tag, stack=stack.name, python=stack.image.python,
                      pins={p.name: p.version for p in stack.pins}, variables=dict(stack.image.vars))
