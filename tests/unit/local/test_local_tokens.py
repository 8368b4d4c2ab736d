"""Dev tokens: signed by the data dir's key; expired, foreign, wrong-audience ones refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import jwt
import pytest

from engram.errors import Unauthorized
from engram.local import tokens
from engram.local.tokens import TokenSigner, key_path
from engram.settings import Settings, get_settings

SETTINGS = Settings()


def signer(tmp_path: Path, name: str = "a", audience: str = "engram-local") -> TokenSigner:
    return TokenSigner(tmp_path / name, audience=audience, settings=SETTINGS)


def test_round_trip_claims(tmp_path: Path) -> None:
    s = signer(tmp_path)
    token = s.issue("alice", "acme", admin=True, groups=("readers",))
    claims = s.verify(token)
    assert claims["sub"] == "alice"
    assert claims["custom:team"] == "acme"
    assert claims["cognito:groups"] == ["readers", "engram-admins"]
    assert claims["aud"] == "engram-local"
    assert claims["scope"] == "engram/user"


def test_service_and_team_admin_tokens(tmp_path: Path) -> None:
    s = signer(tmp_path)
    svc = s.verify(s.issue("backend", "acme", service=True))
    assert svc["scope"] == "engram/service"
    ta = s.verify(s.issue("tina", "acme", team_admin=True))
    assert ta["cognito:groups"] == ["engram-team-admins"]


def test_key_is_created_once_private(tmp_path: Path) -> None:
    s = signer(tmp_path)
    token = s.issue("alice", "acme")
    path = key_path(tmp_path / "a")
    assert path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # a second signer on the same dir (another process, later) accepts the token
    assert TokenSigner(tmp_path / "a", audience="engram-local", settings=SETTINGS).verify(token)


def test_expired_token_is_refused(tmp_path: Path) -> None:
    s = signer(tmp_path)
    token = s.issue("alice", "acme", ttl_s=-60)
    with pytest.raises(Unauthorized, match="expired"):
        s.verify(token)


def test_token_of_another_data_dir_is_refused(tmp_path: Path) -> None:
    token = signer(tmp_path, "a").issue("alice", "acme")
    with pytest.raises(Unauthorized):
        signer(tmp_path, "b").verify(token)


def test_wrong_audience_is_refused(tmp_path: Path) -> None:
    s = signer(tmp_path)
    token = s.issue("alice", "acme", audience="someone-else")
    with pytest.raises(Unauthorized, match="audience"):
        s.verify(token)


def test_tampered_and_unsigned_tokens_are_refused(tmp_path: Path) -> None:
    s = signer(tmp_path)
    token = s.issue("alice", "acme")
    header, _payload, sig = token.split(".")
    other = s.issue("mallory", "acme").split(".")[1]
    with pytest.raises(Unauthorized):
        s.verify(f"{header}.{other}.{sig}")
    unsigned = jwt.encode(
        {"sub": "x", "aud": "engram-local", "iss": "engram-local", "exp": 9999999999, "iat": 1},
        key=None,
        algorithm="none",
    )
    with pytest.raises(Unauthorized):
        s.verify(unsigned)
    hs = jwt.encode(
        {"sub": "x", "aud": "engram-local", "iss": "engram-local", "exp": 9999999999, "iat": 1},
        key="k" * 32,
        algorithm="HS256",
    )
    with pytest.raises(Unauthorized):
        s.verify(hs)
    with pytest.raises(Unauthorized):
        s.verify("not-a-token")


def test_wrong_issuer_is_refused(tmp_path: Path) -> None:
    s = signer(tmp_path)
    token = s.issue("alice", "acme", extra_claims={"iss": "https://evil.example"})
    with pytest.raises(Unauthorized, match="issuer"):
        s.verify(token)


def test_cli_prints_a_verifiable_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "cli"))
    get_settings.cache_clear()
    try:
        code = tokens.main(
            ["--user", "u1", "--team", "t1", "--admin", "--groups", "g1, g2", "--ttl", "60"]
        )
        assert code == 0
        token = capsys.readouterr().out.strip()
        claims = tokens.verify(token)
        assert claims["sub"] == "u1"
        assert claims["cognito:groups"] == ["g1", "g2", "engram-admins"]
        assert claims["exp"] - claims["iat"] == 60
        assert (tmp_path / "cli" / "keys" / "dev-signing-key.pem").exists()
    finally:
        get_settings.cache_clear()


def test_cli_requires_user_and_team() -> None:
    with pytest.raises(SystemExit) as info:
        tokens.main(["--user", "u1"])
    assert info.value.code == 2
