"""Ship Dockerfile.in, templates/ and gates/ inside the wheel as stackctl/_assets/.

They stay at the top of the repository (the product's layout); setuptools' package data only takes files
inside a package, so the build copies them in. An editable install finds them in the checkout instead.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ASSETS = ("Dockerfile.in", "templates", "gates")


class BuildWithAssets(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "stackctl" / "_assets"
        for name in ASSETS:
            source = Path(name)
            if source.is_dir():
                shutil.copytree(source, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildWithAssets})
