"""One builder for the small profiles tests write: the preamble (stack, targets, one index) once, the
pins and the rest as the scenario needs them."""

from __future__ import annotations

from pathlib import Path

SYSTEM_LIBS = ["libdl.so.*", "librt.so.*", "libc.so.6", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6"]


def profile_toml(name: str, pins: dict[str, str | dict[str, str]], *, index: str = "i",
                 index_url: str = "http://127.0.0.1:1/simple/", index_extra: str = "",
                 python: tuple[str, ...] = ("3.10",), allow: list[str] | None = None, extra: str = "") -> str:
    """A profile whose pins all come from one index. A pin is `version`, or a table of its fields
    (`{"version": "1.0", "abi": "check"}`)."""
    pythons = ", ".join(f'"{p}"' for p in python)
    out = [f'[stack]\nname = "{name}"\ndescription = "x"\n',
           f'[targets]\npython = [{pythons}]\nplatforms = ["linux_x86_64"]\n',
           f'[indexes.{index}]\nurl = "{index_url}"\n{index_extra}']
    for pin, spec in pins.items():
        fields = {"version": spec} if isinstance(spec, str) else spec
        body = "".join(f'{k} = "{v}"\n' for k, v in {"index": index, **fields}.items())
        out.append(f"[pins.{pin}]\n{body}")
    if allow is not None:
        out.append("[abi]\nallow = [" + ", ".join(f'"{a}"' for a in allow) + "]\n")
    return "\n".join(out) + extra


def write_profile(directory: Path, name: str, pins: dict[str, str | dict[str, str]], **kwargs: object) -> Path:
    """`directory/stacks/NAME.toml` from `profile_toml`."""
    path = directory / "stacks" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_toml(name, pins, **kwargs), encoding="utf-8")  # type: ignore[arg-type]
    return path
