"""Where `Dockerfile.in`, `templates/` and `gates/` are: shipped inside the wheel as `stackctl/_assets/`, or,
in a source checkout (an editable install), at the top of the repository where the product's layout keeps
them."""

from __future__ import annotations

from pathlib import Path

from stackctl.errors import InputError

_PACKAGE = Path(__file__).resolve().parent.parent


def asset_root() -> Path:
    for root in (_PACKAGE / "_assets", _PACKAGE.parent):
        if (root / "Dockerfile.in").is_file() and (root / "gates" / "gate.py").is_file():
            return root
    raise InputError(f"{_PACKAGE}: Dockerfile.in, templates/ and gates/ are missing from this installation",
                     hint="reinstall stackctl (`pip install --force-reinstall stackctl`)")
