"""The gcc-built libraries and wheels as pytest fixtures, built once per session.

A test module loads them with `pytest_plugins = ("tests.support.elf_plugin",)` and imports the data
types and constants from `tests.support.elf_fixtures`; importing fixture functions by name instead would
shadow them with the test's parameters.
"""

from __future__ import annotations

import pytest

from tests.support.elf_fixtures import Libs, Wheels, build_libs, build_stack_wheels, have_gcc


@pytest.fixture(scope="session")
def elf_libs(tmp_path_factory: pytest.TempPathFactory) -> Libs:
    if not have_gcc():
        pytest.fail("gcc and g++ are needed to build the ELF fixtures")
    return build_libs(tmp_path_factory.mktemp("elf-libs"))


@pytest.fixture(scope="session")
def stack_wheels(elf_libs: Libs, tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    return build_stack_wheels(elf_libs, tmp_path_factory.mktemp("elf-wheels"))
