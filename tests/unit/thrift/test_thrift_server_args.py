"""``arctic-sql thriftserver`` arguments, without Spark: every rule is strict by default and each
option relaxes its own."""

from __future__ import annotations

import pytest

from arctic_sql.thrift.server import UsageError, _settings, build_arg_parser


def _parsed(tmp_path, *argv: str):
    args = build_arg_parser().parse_args(list(argv))
    return _settings(args, str(tmp_path / "warehouse"))


def test_the_defaults_are_strict(tmp_path):
    settings = _parsed(tmp_path)
    policy = settings.policy
    assert not (policy.allow_external_locations or policy.allow_unsafe_functions or policy.allow_set_any)
    assert (settings.limits.idle_timeout_s, settings.limits.max_connections) == (900, 64)
    assert settings.limits.max_frame_bytes == 16 * 1024 * 1024
    assert (settings.throttle.attempts, settings.throttle.lockout_s) == (5, 1)


@pytest.mark.parametrize(
    ("option", "relaxed"),
    [
        ("--allow-external-locations", {"allow_external_locations"}),
        ("--allow-unsafe-functions", {"allow_unsafe_functions"}),
        ("--allow-set-any", {"allow_set_any"}),
        ("--trusted", {"allow_external_locations", "allow_unsafe_functions", "allow_set_any"}),
    ],
)
def test_each_option_relaxes_its_rules(tmp_path, option, relaxed):
    policy = _parsed(tmp_path, option).policy
    flags = {"allow_external_locations", "allow_unsafe_functions", "allow_set_any"}
    assert {flag for flag in flags if getattr(policy, flag)} == relaxed


def test_limits_are_taken_and_checked(tmp_path):
    settings = _parsed(
        tmp_path,
        "--idle-timeout",
        "0",
        "--max-connections",
        "2",
        "--max-frame-bytes",
        "4096",
        "--login-attempts",
        "0",
    )
    assert settings.limits.idle_timeout_s == 0 and settings.limits.max_connections == 2
    assert settings.limits.max_frame_bytes == 4096 and settings.throttle.attempts == 0
    with pytest.raises(UsageError, match="--max-frame-bytes must be at least 1024"):
        _parsed(tmp_path, "--max-frame-bytes", "10")
    with pytest.raises(UsageError, match="--idle-timeout must be 0 or more"):
        _parsed(tmp_path, "--idle-timeout", "-5")


def test_a_readable_password_file_is_accepted_only_when_asked(tmp_path):
    passwords = tmp_path / "passwords"
    passwords.write_text("alice:s3cret\n", encoding="utf-8")
    passwords.chmod(0o640)
    with pytest.raises(UsageError, match="accessible by group or others"):
        _parsed(tmp_path, "--auth", "PLAIN", "--password-file", str(passwords))
    settings = _parsed(
        tmp_path, "--auth", "PLAIN", "--password-file", str(passwords), "--allow-readable-password-file"
    )
    assert settings.credentials.check("alice", "s3cret")


def test_a_password_file_inside_the_warehouse_is_refused(tmp_path):
    (tmp_path / "warehouse").mkdir()
    passwords = tmp_path / "warehouse" / "passwords"
    passwords.write_text("alice:s3cret\n", encoding="utf-8")
    passwords.chmod(0o600)
    with pytest.raises(UsageError, match="is inside the warehouse .*, where clients can read it"):
        _parsed(tmp_path, "--auth", "PLAIN", "--password-file", str(passwords))
