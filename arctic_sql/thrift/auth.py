"""Logins for ``--auth PLAIN``: the password file, salted hashes, and the failed-login lockout.

The password file holds ``user:password`` lines (plain, kept for compatibility) or
``user:pbkdf2_sha256$<iterations>$<salt b64>$<hash b64>`` lines, made by
``arctic-sql thriftserver --hash-password`` (the password on stdin). Like ssh with a private key,
the server refuses a file that group or others may read or write.

Every login derives one key with :data:`HASH_ITERATIONS` iterations (or the entry's own) whether the
user exists, has a plain entry or a hashed one, so the time a refusal takes does not tell which
users exist.

>>> entry = hash_password("s3cret", iterations=1000)
>>> Credentials({"alice": entry}).check("alice", "s3cret"), Credentials({"alice": entry}).check("bob", "s3cret")
(True, False)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat
import threading
import time
from collections.abc import Callable

HASH_SCHEME = "pbkdf2_sha256"
HASH_ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256; about 0.35 s here
_DUMMY_SALT = b"arctic-sql-dummy"
MAX_TRACKED = 10_000  # lockout entries kept before expired ones are dropped

Derive = Callable[[str, bytes, bytes, int], bytes]


class PasswordFileError(Exception):
    """The password file cannot be used: reported as one line before the server starts."""


def hash_password(password: str, iterations: int = HASH_ITERATIONS, salt: bytes | None = None) -> str:
    """A password file entry's hash: ``pbkdf2_sha256$<iterations>$<salt b64>$<hash b64>``."""
    salt = os.urandom(16) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{HASH_SCHEME}${iterations}${_b64(salt)}${_b64(digest)}"


def read_password_file(path: str, allow_readable: bool = False) -> dict[str, str]:
    """``user -> entry`` of a password file; refused if group or others have any access to it."""
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PasswordFileError(f"Cannot read password file {path}: {e.strerror}") from None
    if mode & 0o077 and not allow_readable:
        raise PasswordFileError(
            f"Password file {path} is accessible by group or others (mode {stat.S_IMODE(mode):04o}); "
            f"run chmod 600 {path} (--allow-readable-password-file accepts it)"
        )
    passwords = {}
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, entry = line.partition(":")
        if not sep or not user:
            raise PasswordFileError(f"Password file {path}, line {number}: expected user:password")
        if entry.startswith(HASH_SCHEME + "$") and _parse_hash(entry) is None:
            raise PasswordFileError(
                f"Password file {path}, line {number}: expected "
                f"{HASH_SCHEME}$<iterations>$<salt base64>$<hash base64>"
            )
        passwords[user] = entry
    if not passwords:
        raise PasswordFileError(f"Password file {path} names no user")
    return passwords


class Credentials:
    """Who may connect: anyone (NONE, ``entries=None``), or the users of a password file (PLAIN).

    ``derive`` is :func:`hashlib.pbkdf2_hmac`; it is a parameter so a test can count its calls.
    """

    def __init__(self, entries: dict[str, str] | None, derive: Derive = hashlib.pbkdf2_hmac) -> None:
        self._entries = entries
        self._derive = derive
        self._dummy = (HASH_ITERATIONS, _DUMMY_SALT, b"\0" * 32)

    @property
    def required(self) -> bool:
        return self._entries is not None

    def check(self, user: str, password: str) -> bool:
        if self._entries is None:
            return True
        entry = self._entries.get(user)
        hashed = _parse_hash(entry) if entry is not None else None
        iterations, salt, expected = hashed or self._dummy
        digest = self._derive("sha256", password.encode(), salt, iterations)
        if hashed is not None:
            return hmac.compare_digest(digest, expected)
        if entry is None:
            hmac.compare_digest(digest, expected)
            return False
        return hmac.compare_digest(entry.encode(), password.encode())  # a plain entry


def _parse_hash(entry: str) -> tuple[int, bytes, bytes] | None:
    parts = entry.split("$")
    if len(parts) != 4 or parts[0] != HASH_SCHEME or not parts[1].isdigit() or int(parts[1]) < 1:
        return None
    try:
        return (
            int(parts[1]),
            base64.b64decode(parts[2], validate=True),
            base64.b64decode(parts[3], validate=True),
        )
    except ValueError:
        return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class LoginThrottle:
    """Failed-login lockout per user name and per client address, without sleeping.

    After ``attempts`` failures for a user (``4 * attempts`` for an address, which may try many users)
    further logins for it are refused unchecked for ``lockout_s`` seconds, doubling with every
    further failure up to ``max_lockout_s``. A successful login clears its user and address.
    ``attempts=0`` turns the lockout off.
    """

    ADDRESS_FACTOR = 4

    def __init__(
        self,
        attempts: int,
        lockout_s: float,
        max_lockout_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.lockout_s = lockout_s
        self.max_lockout_s = max_lockout_s
        self._clock = clock
        self._failures: dict[tuple[str, str], int] = {}
        self._locked_until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def wait_s(self, user: str, address: str) -> float:
        """Seconds until ``user`` from ``address`` may try again (0: now)."""
        now = self._clock()
        with self._lock:
            until = max(self._locked_until.get(key, 0.0) for key in _keys(user, address))
        return max(0.0, until - now)

    def failed(self, user: str, address: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._failures) > MAX_TRACKED:
                self._forget_expired(now)
            for key in _keys(user, address):
                count = self._failures.get(key, 0) + 1
                self._failures[key] = count
                allowed = self.attempts * (self.ADDRESS_FACTOR if key[0] == "address" else 1)
                if self.attempts and count >= allowed:
                    delay = min(self.lockout_s * 2 ** min(count - allowed, 30), self.max_lockout_s)
                    self._locked_until[key] = now + delay

    def succeeded(self, user: str, address: str) -> None:
        with self._lock:
            for key in _keys(user, address):
                self._failures.pop(key, None)
                self._locked_until.pop(key, None)

    def _forget_expired(self, now: float) -> None:
        for key in [k for k in self._failures if self._locked_until.get(k, 0.0) <= now]:
            self._failures.pop(key, None)
            self._locked_until.pop(key, None)


def _keys(user: str, address: str) -> tuple[tuple[str, str], tuple[str, str]]:
    return ("user", user), ("address", address)
