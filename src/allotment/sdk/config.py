"""Where the SDK finds its server and token: ALLOT_URL / ALLOT_TOKEN, else the config file `allot login` writes.

Owns: the config file's location ($XDG_CONFIG_HOME/allot/config.toml, else ~/.config/allot/config.toml; ALLOT_CONFIG
overrides), reading it (TOML: `url`, `token`, `user`), writing it with owner-only permissions, and the precedence:
explicit arguments, then the environment, then the file, then the default URL.

Must not: talk to the server (the Client does) or print anything.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8642"


@dataclass(frozen=True, slots=True)
class ClientSettings:
    url: str
    token: str | None
    user: str | None = None
    source: str = "default"
    """Where the token came from: argument, environment, a config file's path, or default (no token)."""


def config_path() -> Path:
    explicit = os.environ.get("ALLOT_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "allot" / "config.toml"


def read_config(path: Path | None = None) -> dict[str, str]:
    """The config file's string settings; empty when it does not exist. A malformed file is a ValueError."""
    path = path or config_path()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None
    return {k: v for k, v in data.items() if isinstance(v, str)}


def write_config(url: str, token: str, user: str | None = None, path: Path | None = None) -> Path:
    """Save the server and token (readable by the owner only) and return the file's path."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# written by `allot login`", f"url = {json.dumps(url)}", f"token = {json.dumps(token)}"]
    if user:
        lines.append(f"user = {json.dumps(user)}")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    tmp.replace(path)
    return path


def resolve(url: str | None = None, token: str | None = None) -> ClientSettings:
    """Arguments first, then ALLOT_URL / ALLOT_TOKEN, then the config file, then DEFAULT_URL without a token. The
    file's token is only used for the file's own server."""
    file = read_config()
    env_url, env_token = os.environ.get("ALLOT_URL") or None, os.environ.get("ALLOT_TOKEN") or None
    chosen_url = url or env_url or file.get("url") or DEFAULT_URL
    if token:
        return ClientSettings(chosen_url, token, None, "argument")
    if env_token:
        return ClientSettings(chosen_url, env_token, None, "environment")
    if file.get("token") and file.get("url", chosen_url).rstrip("/") == chosen_url.rstrip("/"):
        return ClientSettings(chosen_url, file["token"], file.get("user"), str(config_path()))
    return ClientSettings(chosen_url, None, None, "default")
