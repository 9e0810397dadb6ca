"""The bound socket of an extra port of the server (`--metrics-port`, `--http-port`)."""

from __future__ import annotations

import asyncio
import socket

__all__ = ("bound_socket",)


async def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` (0 = a free port) at its first address, not yet listening.

    Raises:
        OSError: The address cannot be bound.
    """
    loop = asyncio.get_running_loop()
    family, kind, proto, _, address = (
        await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
    except BaseException:
        listener.close()
        raise
    return listener
