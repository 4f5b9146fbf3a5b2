"""Registry credentials exactly as Docker resolves them, through the docker SDK's own code.

`docker.auth.AuthConfig` reads the Docker config and picks, for a registry, `credHelpers[host]`, else
`credsStore`, else `auths` (the CLI's order); `docker.credentials.Store` speaks the helper protocol. One
thing is changed: the SDK runs a helper with its stderr on ours, and a helper that fails may write the
secret there, so here every helper runs with stderr captured and dropped. The answer is used in the registry
client's headers, the engine's push's auth config and skopeo's private auth file (engine/skopeo.py) only; no
message ever carries it.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from dataclasses import dataclass
from typing import Any

from stackctl.errors import InputError, ServiceError


@dataclass(frozen=True)
class Login:
    username: str
    password: str
    server: str

    def __repr__(self) -> str:
        return f"Login(username={self.username!r}, server={self.server!r})"

    def auth_config(self) -> dict[str, str]:
        """What the engine's push takes as X-Registry-Auth."""
        return {"username": self.username, "password": self.password, "serveraddress": self.server}


def _captured_store() -> Any:
    from docker import credentials
    from docker.credentials import errors as store_errors
    from docker.credentials.utils import create_environment_dict

    class Store(credentials.Store):  # type: ignore[misc]
        def _execute(self, subcmd: str, data_input: bytes | None) -> bytes:
            if self.exe is None:
                raise store_errors.StoreError(f"{self.program} is not on PATH")
            try:
                proc = subprocess.run([self.exe, subcmd], input=data_input, capture_output=True, timeout=60,
                                      env=create_environment_dict(self.environment), check=False)
            except (OSError, subprocess.TimeoutExpired):
                raise store_errors.StoreError(f"{self.program} did not run to an answer") from None
            if proc.returncode != 0:  # the SDK's own reading of a failure ("not found" or not)
                raise store_errors.process_store_error(
                    subprocess.CalledProcessError(proc.returncode, self.exe, output=proc.stdout), self.program)
            return bytes(proc.stdout)

    return Store


def config_path() -> str:
    import docker.utils.config

    return str(docker.utils.config.find_config_file() or "~/.docker/config.json")


def resolve(registry: str) -> Login | None:
    """The login the Docker config gives `registry` (host[:port]); None when it gives none. A helper
    that is missing, fails or answers other than its JSON is a ServiceError naming the helper only."""
    import docker.auth
    import docker.errors

    with warnings.catch_warnings():  # the SDK warns on stderr about a helper missing from PATH
        warnings.simplefilter("ignore")
        try:
            config = docker.auth.load_config()
        except (docker.errors.DockerException, ValueError):
            raise InputError(f"{config_path()}: an `auths` entry for a registry is not base64 of user:password") \
                from None
        store_name = config.get_credential_store(registry) if (config.creds_store or config.cred_helpers) else None
        if store_name and shutil.which(f"docker-credential-{store_name}") is None:
            raise InputError(f"the Docker config names credential helper {store_name!r} for {registry}, but "
                             f"docker-credential-{store_name} is not on PATH")
        if store_name:
            config._stores[store_name] = _captured_store()(store_name, environment=config._credstore_env)
        try:
            found = config.resolve_authconfig(registry)
        except docker.errors.DockerException:
            raise ServiceError(f"credential helper docker-credential-{store_name} failed for {registry}; its "
                               "output is not shown (it may hold the secret)") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ServiceError(f"credential helper docker-credential-{store_name} answered something other than "
                               f"its JSON for {registry}") from None
    if not isinstance(found, dict):
        return None
    user = found.get("Username") or found.get("username")
    secret = found.get("Password") or found.get("password")
    if not user or secret is None:
        return None
    return Login(str(user), str(secret), registry)
