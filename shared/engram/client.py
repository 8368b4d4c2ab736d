"""The Python client, under the service package's name.

The client is its own distribution, ``engram-client`` (package ``engram_client``, in
``clients/python``), which needs only httpx and pydantic; the service depends on it, and this
module re-exports it so that ``from engram.client import EngramClient`` keeps working.
"""

from engram_client import *  # noqa: F403 - the same public names, one implementation
