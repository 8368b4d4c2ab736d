import socket

import pytest


def test_unit_tier_cannot_open_inet_connections() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(RuntimeError):
        s.connect(("127.0.0.1", 9))
