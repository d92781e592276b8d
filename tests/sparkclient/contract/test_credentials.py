"""Passwords read from files (``sparkclient.contract.credentials``): a Docker secret's file, its trailing
newline dropped, put into a URL that carries none."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import pytest
import redis

from sparkclient.contract.credentials import DEFAULT_REDIS_URL, control_redis_url, file_secret, url_with_password


def test_a_secret_file_is_read_without_its_trailing_newline(tmp_path):
    (tmp_path / "pw").write_text("s3 cret\n")
    (tmp_path / "crlf").write_bytes(b"key\r\n")
    env = {"A_FILE": str(tmp_path / "pw"), "B_FILE": str(tmp_path / "crlf"), "EMPTY_FILE": ""}
    assert [file_secret(name, env) for name in ("A_FILE", "B_FILE", "EMPTY_FILE", "UNSET_FILE")] == [
        "s3 cret", "key", "", ""]
    with pytest.raises(OSError, match=r"MISSING_FILE=.*/nope"):
        file_secret("MISSING_FILE", {"MISSING_FILE": str(tmp_path / "nope")})


@pytest.mark.parametrize(("url", "password", "expected"), [
    ("redis://redis:6379/0", "p@ss:w/rd %", "redis://:p%40ss%3Aw%2Frd%20%25@redis:6379/0"),
    ("redis://:old@redis:6379/0", "new", "redis://:new@redis:6379/0"),
    ("postgres://sparkscaler@postgres:5432/db", "pw", "postgres://sparkscaler:pw@postgres:5432/db"),
    ("redis://redis:6379/0", "", "redis://redis:6379/0"),
])
def test_a_password_goes_into_a_url_encoded(url, password, expected):
    assert url_with_password(url, password) == expected
    if password:
        assert unquote(urlsplit(expected).password) == password
        if url.startswith("redis://"):
            assert redis.connection.parse_url(expected)["password"] == password  # as redis-py reads it


def test_the_control_channel_takes_its_password_from_the_file(tmp_path):
    (tmp_path / "redis_password").write_text("hunter2/x\n")
    env = {"SPARKSCALER_REDIS_URL": "redis://redis:6379/0",
           "SPARKSCALER_REDIS_PASSWORD_FILE": str(tmp_path / "redis_password")}
    assert control_redis_url(env) == "redis://:hunter2%2Fx@redis:6379/0"
    assert control_redis_url({"SPARKSCALER_REDIS_URL": "redis://:inline@h:1/0"}) == "redis://:inline@h:1/0"
    assert control_redis_url({}) == DEFAULT_REDIS_URL
