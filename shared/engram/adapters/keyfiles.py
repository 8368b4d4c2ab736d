"""Local key files under ``Settings.data_dir/keys/``: created once, mode 0600, never replaced.

Two local services with different data dirs therefore never share keys, and every process on
one data dir (``engram serve``, ``engram token``, tests) reads the same key. A file is written
under a temporary name and linked into place, so concurrent creators agree on one key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import uuid
from collections.abc import Callable
from pathlib import Path

KEYS_DIR = Path("keys")
CURSOR_KEY_FILE = KEYS_DIR / "cursor-key"


def read_or_create(path: Path, make: Callable[[], bytes]) -> bytes:
    """The bytes of ``path``; when it does not exist yet, ``make()`` them first (atomically:
    a concurrent creator's key wins and is the one returned)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(make())
        try:
            os.link(tmp, path)  # atomic; loses cleanly to a concurrent creator
        except FileExistsError:
            pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    return path.read_bytes()


def cursor_key(data_dir: Path) -> bytes:
    """The HMAC key of review cursors for the local service on ``data_dir``."""
    return read_or_create(Path(data_dir) / CURSOR_KEY_FILE, lambda: secrets.token_bytes(32))
