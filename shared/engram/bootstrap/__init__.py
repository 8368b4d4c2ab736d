"""The composition root: the one place that picks concrete adapters.

``Container`` (``engram.bootstrap.container``) builds every part of one process from
``Settings`` on first use; ``engram.bootstrap.maintenance`` assembles the maintenance job from
a container's parts. Handlers call ``get_container()``; tests and the local service build a
container from explicit parts and install it with ``set_container``.

Outside this package only the local dev server (``engram.local``), the CLI, the demo and the
public façades (``engram``, ``engram.client``) construct adapters.
"""

from engram.bootstrap.container import Container, get_container, set_container

__all__ = ["Container", "get_container", "set_container"]
