"""Keep the suite off the developer's home directory and global configuration.

For the whole session, the caches (stackctl's HTTP cache and uv's, both under `XDG_CACHE_HOME` unless told
otherwise, pip's too), uv's data directory, the Docker client configuration and git's global and system
configuration point into the session's temporary directory. A run then leaves no file in the home
directory, and a developer's `~/.gitconfig` (say `status.showUntrackedFiles = no`, which would hide a dirty
tree) or `~/.docker/config.json` cannot change an outcome.

pip's configuration is left alone on purpose: the public index and the machine's CA bundle come from it
(the README's first command is tested against them); tests that must not reach the public index override
it with `--index public=URL` or `PIP_INDEX_URL`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    (home / "docker").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home / "cache"))
        mp.setenv("XDG_DATA_HOME", str(home / "data"))  # uv keeps a credentials lock file there
        for var in ("STACKCTL_CACHE_DIR", "UV_CACHE_DIR", "PIP_CACHE_DIR"):
            mp.delenv(var, raising=False)
        mp.setenv("DOCKER_CONFIG", str(home / "docker"))  # no auths, no credential helpers
        mp.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))  # absent: an empty global configuration
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for var in ("GITHUB_ACTIONS", "GITHUB_WORKSPACE", "CI_PROJECT_DIR"):  # a CI runner's own: no annotations
            mp.delenv(var, raising=False)
        yield
