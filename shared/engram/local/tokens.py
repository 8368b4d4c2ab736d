"""Dev tokens for the local service: ES256 JWTs signed by a key under ``Settings.data_dir``.

The key (``<data_dir>/keys/dev-signing-key.pem``, mode 0600) is created on first use; two
local services with different data dirs therefore never accept each other's tokens. The
claims mirror a Cognito token as the API Gateway JWT authorizer would pass it: ``sub``, the
team claim (``Settings.team_claim``), the groups claim (``Settings.groups_claim``), ``scope``
(``Settings.service_scope`` for ``--service``), ``iss`` = ``engram-local``, ``aud`` =
``Settings.local_audience``, ``iat``, ``exp``, ``jti``.

``engram token --user U --team T [--admin] [--team-admin] [--groups G,...] [--service]
[--ttl S]`` prints one.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, TypedDict, Unpack

from engram.adapters.keyfiles import KEYS_DIR, read_or_create
from engram.errors import Unauthorized
from engram.identity import TEAM_ID_PATTERN
from engram.settings import Settings, get_settings

ISSUER = "engram-local"
ALGORITHM = "ES256"
KEY_FILE = KEYS_DIR / "dev-signing-key.pem"
USER_SCOPE_SUFFIX = "user"
LEEWAY_S = 5

_lock = threading.Lock()
_keys: dict[Path, tuple[Any, Any]] = {}


def key_path(data_dir: Path) -> Path:
    return Path(data_dir) / KEY_FILE


def _load_or_create(path: Path) -> tuple[Any, Any]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    def make() -> bytes:
        key = ec.generate_private_key(ec.SECP256R1())
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    private = serialization.load_pem_private_key(read_or_create(path, make), password=None)
    return private, private.public_key()


class TokenSigner:
    """Issues and verifies dev tokens with the key under ``data_dir``."""

    def __init__(self, data_dir: Path, *, audience: str, settings: Settings | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.audience = audience
        self.settings = settings or get_settings()

    def _keys(self) -> tuple[Any, Any]:
        path = key_path(self.data_dir).resolve()
        with _lock:
            pair = _keys.get(path)
            if pair is None:
                pair = _load_or_create(path)
                _keys[path] = pair
        return pair

    def issue(
        self,
        user: str,
        team: str | None,
        *,
        admin: bool = False,
        team_admin: bool = False,
        groups: tuple[str, ...] | list[str] = (),
        service: bool = False,
        ttl_s: int = 3600,
        audience: str | None = None,
        extra_claims: dict[str, Any] | None = None,
    ) -> str:
        import jwt

        s = self.settings
        all_groups = list(dict.fromkeys([*groups]))
        if admin and s.admin_group not in all_groups:
            all_groups.append(s.admin_group)
        if team_admin and s.team_admin_group not in all_groups:
            all_groups.append(s.team_admin_group)
        server, _, _ = s.service_scope.rpartition("/")
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": user,
            "iss": ISSUER,
            "aud": audience or self.audience,
            "iat": now,
            "exp": now + ttl_s,
            "jti": uuid.uuid4().hex,
            "token_use": "access",
            "scope": s.service_scope if service else f"{server or 'engram'}/{USER_SCOPE_SUFFIX}",
        }
        if team is not None:
            claims[s.team_claim] = team
        if all_groups:
            claims[s.groups_claim] = all_groups
        claims.update(extra_claims or {})
        private, _ = self._keys()
        token: str = jwt.encode(claims, private, algorithm=ALGORITHM, headers={"kid": "local"})
        return token

    def verify(self, token: str) -> dict[str, Any]:
        """The claims of a valid token; ``Unauthorized`` for a bad signature, exp, aud or iss."""
        import jwt

        _, public = self._keys()
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                public,
                algorithms=[ALGORITHM],
                audience=self.audience,
                issuer=ISSUER,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("token expired") from None
        except jwt.InvalidAudienceError:
            raise Unauthorized("token audience is not accepted") from None
        except jwt.InvalidIssuerError:
            raise Unauthorized("token issuer is not accepted") from None
        except jwt.PyJWTError:
            raise Unauthorized("token is not valid") from None
        return claims


def default_signer(settings: Settings | None = None) -> TokenSigner:
    s = settings or get_settings()
    return TokenSigner(s.data_dir, audience=s.local_audience, settings=s)


class TokenGrant(TypedDict, total=False):
    """The keywords of ``TokenSigner.issue`` besides its user, team and extra claims."""

    admin: bool
    team_admin: bool
    groups: tuple[str, ...] | list[str]
    service: bool
    ttl_s: int
    audience: str | None


def issue_token(user: str, team: str | None, **grant: Unpack[TokenGrant]) -> str:
    """A dev token signed by this data dir's key (``audience`` defaults to the local one)."""
    return default_signer().issue(user, team, **grant)


def verify(token: str) -> dict[str, Any]:
    """Claims of a token this data dir's key signed; raises ``Unauthorized`` otherwise."""
    return default_signer().verify(token)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram token", description="Print a dev token.")
    parser.add_argument("--user", required=True, help="the token's sub")
    parser.add_argument("--team", required=True, help="the team claim")
    parser.add_argument("--admin", action="store_true", help="member of the admin group")
    parser.add_argument("--team-admin", action="store_true", help="member of the team-admin group")
    parser.add_argument("--groups", default="", help="comma-separated extra groups")
    parser.add_argument(
        "--service", action="store_true", help="a service token (may act for users of its team)"
    )
    parser.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds")
    args = parser.parse_args(argv)
    if args.ttl <= 0:
        parser.error("--ttl must be positive")
    if not re.fullmatch(TEAM_ID_PATTERN, args.team):
        parser.error("--team must be a team id: a letter, then letters, digits, '.', '_' or '-'")
    groups = tuple(g.strip() for g in args.groups.split(",") if g.strip())
    print(
        issue_token(
            args.user,
            args.team,
            admin=args.admin,
            team_admin=args.team_admin,
            groups=groups,
            service=args.service,
            ttl_s=args.ttl,
        )
    )
    sys.stdout.flush()
    return 0
