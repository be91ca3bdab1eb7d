"""Logins of the Thrift server without Spark: the password file, salted hashes, equal work, lockout."""

from __future__ import annotations

import hashlib
import os

import pytest

from arctic_sql.thrift.auth import (
    HASH_ITERATIONS,
    Credentials,
    LoginThrottle,
    PasswordFileError,
    hash_password,
    read_password_file,
)


def _password_file(tmp_path, text: str, mode: int = 0o600) -> str:
    path = tmp_path / "passwords"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return str(path)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_a_password_file_others_can_access_is_refused(tmp_path, mode):
    path = _password_file(tmp_path, "alice:s3cret\n", mode)
    with pytest.raises(PasswordFileError) as refused:
        read_password_file(path)
    message = str(refused.value)
    assert f"mode {mode:04o}" in message and f"chmod 600 {path}" in message and "\n" not in message
    assert read_password_file(path, allow_readable=True) == {"alice": "s3cret"}


def test_a_private_password_file_holds_plain_and_hashed_entries(tmp_path):
    hashed = hash_password("hunter2", iterations=1000)
    path = _password_file(tmp_path, f"# users\nalice:s3cret\nbob:{hashed}\n", 0o400)
    entries = read_password_file(path)
    assert entries == {"alice": "s3cret", "bob": hashed}
    credentials = Credentials(entries)
    assert credentials.check("alice", "s3cret") and credentials.check("bob", "hunter2")
    assert not credentials.check("bob", hashed)  # the hash itself is not the password
    assert not credentials.check("alice", "hunter2") and not credentials.check("carol", "s3cret")


def test_hashes_are_salted_and_malformed_ones_are_refused(tmp_path):
    first, second = hash_password("same", iterations=1000), hash_password("same", iterations=1000)
    assert first != second and first.startswith("pbkdf2_sha256$1000$")
    path = _password_file(tmp_path, "alice:pbkdf2_sha256$many$c2FsdA==$aGFzaA==\n")
    with pytest.raises(PasswordFileError, match="line 1: expected pbkdf2_sha256"):
        read_password_file(path)


class CountingDerive:
    """hashlib.pbkdf2_hmac, recording the iterations of each call."""

    def __init__(self) -> None:
        self.iterations: list[int] = []

    def __call__(self, name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
        self.iterations.append(iterations)
        return hashlib.pbkdf2_hmac(name, password, salt, iterations)


def test_every_login_does_the_same_work_whether_or_not_the_user_exists():
    derive = CountingDerive()
    credentials = Credentials({"alice": "s3cret", "bob": hash_password("hunter2")}, derive)
    for user, password in (("alice", "wrong"), ("bob", "wrong"), ("nobody", "wrong"), ("alice", "s3cret")):
        derive.iterations.clear()
        credentials.check(user, password)
        assert derive.iterations == [HASH_ITERATIONS], user


def test_failed_logins_lock_the_user_out_with_a_doubling_delay():
    now = [1000.0]
    throttle = LoginThrottle(attempts=3, lockout_s=2, max_lockout_s=10, clock=lambda: now[0])
    for _ in range(2):
        throttle.failed("alice", "10.0.0.1")
    assert throttle.wait_s("alice", "10.0.0.1") == 0
    throttle.failed("alice", "10.0.0.1")
    assert throttle.wait_s("alice", "10.0.0.1") == 2
    assert throttle.wait_s("alice", "10.0.0.2") == 2  # the user is locked, from anywhere
    assert throttle.wait_s("bob", "10.0.0.2") == 0
    now[0] += 2
    assert throttle.wait_s("alice", "10.0.0.1") == 0
    throttle.failed("alice", "10.0.0.1")
    assert throttle.wait_s("alice", "10.0.0.1") == 4
    for _ in range(5):
        throttle.failed("alice", "10.0.0.1")
    assert throttle.wait_s("alice", "10.0.0.1") == 10  # capped
    throttle.succeeded("alice", "10.0.0.1")
    assert throttle.wait_s("alice", "10.0.0.1") == 0


def test_an_address_that_tries_many_users_is_locked_out():
    now = [0.0]
    throttle = LoginThrottle(attempts=2, lockout_s=5, clock=lambda: now[0])
    for i in range(2 * LoginThrottle.ADDRESS_FACTOR):
        assert throttle.wait_s(f"user{i}", "10.0.0.9") == 0
        throttle.failed(f"user{i}", "10.0.0.9")
    assert throttle.wait_s("someone-new", "10.0.0.9") == 5
    assert throttle.wait_s("someone-new", "10.0.0.10") == 0


def test_no_lockout_when_attempts_is_zero():
    throttle = LoginThrottle(attempts=0, lockout_s=5)
    for _ in range(100):
        throttle.failed("alice", "10.0.0.1")
    assert throttle.wait_s("alice", "10.0.0.1") == 0
