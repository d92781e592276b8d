"""Passwords from files, so that none is in a process's argv or a container's declared environment.

A variable ``<NAME>_FILE`` names a file holding the secret (a Docker secret, which compose mounts at
``/run/secrets/<secret>``); the URL that needs it carries no password and gets it here. The control
channel's URL is ``$SPARKSCALER_REDIS_URL`` with the password of ``$SPARKSCALER_REDIS_PASSWORD_FILE``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

#: The control channel's Redis when nothing else is given.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def file_secret(variable: str, environ: Mapping[str, str] = os.environ) -> str:
    """The contents of the file that ``environ[variable]`` names, without its trailing newline; ``""``
    when the variable is unset or empty.

    Raises:
        OSError: the file cannot be read (the message names the variable and the path).
    """
    path = environ.get(variable, "")
    if not path:
        return ""
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise OSError(exc.errno, f"{variable}={path}: {exc.strerror}") from None


def url_with_password(url: str, password: str) -> str:
    """``url`` (``redis://host:port/db``) with ``password`` as its password (percent-encoded), the user
    name kept; ``url`` unchanged when ``password`` is empty."""
    if not password:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def control_redis_url(environ: Mapping[str, str] = os.environ, default: str = DEFAULT_REDIS_URL) -> str:
    """The control channel's URL: ``$SPARKSCALER_REDIS_URL`` (else ``default``), with the password of the
    file ``$SPARKSCALER_REDIS_PASSWORD_FILE`` when that is set (:func:`file_secret`; OSError when
    unreadable)."""
    url = environ.get("SPARKSCALER_REDIS_URL") or default
    return url_with_password(url, file_secret("SPARKSCALER_REDIS_PASSWORD_FILE", environ))
