"""`--metrics-port`: `/metrics` over HTTP/1.1 on the server's event loop, bounded like the gRPC port.

prometheus-client's own HTTP server gives each connection a thread and waits for its request as long
as it takes, so a few hundred connections that never finish a request hold as many file descriptors,
and the gRPC port then cannot accept. This one holds at most `MAX_CONNECTIONS` (one more is closed at
once), gives a request `HEAD_TIMEOUT_S` to arrive whole (request line and headers together, at most
`MAX_HEAD_BYTES`, however slowly it trickles), and its answer `SEND_TIMEOUT_S` to be read. It answers
one request per connection: `GET` (or `HEAD`) `/metrics` with the registry's exposition in the format
the scraper's `Accept` asks for, 404 for another path, 405 for another method, then closes.
"""

from __future__ import annotations

import asyncio
import gzip
from http import HTTPStatus

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .listening import bound_socket

__all__ = ("HEAD_TIMEOUT_S", "MAX_CONNECTIONS", "MAX_HEAD_BYTES", "SEND_TIMEOUT_S", "MetricsHttp")

MAX_CONNECTIONS = 64
"""Connections held at once; a scraper needs one, a few dashboards a few more."""
HEAD_TIMEOUT_S = 5.0
"""How long a connection may take to send its request line and headers."""
SEND_TIMEOUT_S = 10.0
"""How long the scraper may take to read the answer."""
MAX_HEAD_BYTES = 8192
"""The largest request line plus headers; a scraper's are a few hundred bytes."""


class MetricsHttp:
    """The HTTP endpoint of one registry: `await start(host, port)`, then `await close()`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on `host:port` (0 = a free port) at its first address; returns the bound port.

        Raises:
            OSError: The address cannot be bound.
        """
        listener = await bound_socket(host, port)
        try:
            self._server = await asyncio.start_server(self._serve, sock=listener, limit=MAX_HEAD_BYTES)
        except BaseException:
            listener.close()
            raise
        return int(listener.getsockname()[1])

    async def close(self) -> None:
        """Stop listening and drop every open connection."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in tuple(self._open):
            writer.transport.abort()
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        self._open.add(writer)
        writer.transport.set_write_buffer_limits(high=0)  # drain() waits until the kernel has it all
        answered = False
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            writer.write(self._answer(head))
            await asyncio.wait_for(writer.drain(), SEND_TIMEOUT_S)
            answered = True
        except asyncio.LimitOverrunError:
            writer.write(_response(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE))
            answered = True
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass  # too slow, or gone: nothing to answer
        finally:
            self._open.discard(writer)
            if answered:
                writer.close()  # what is written still goes out, then the connection closes
            else:
                writer.transport.abort()

    def _answer(self, head: bytes) -> bytes:
        """The response to one request head."""
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _response(HTTPStatus.BAD_REQUEST)
        method, target, _ = parts
        headers: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        if target.partition("?")[0] != "/metrics":
            return _response(HTTPStatus.NOT_FOUND)
        if method not in ("GET", "HEAD"):
            return _response(HTTPStatus.METHOD_NOT_ALLOWED, extra=(("Allow", "GET, HEAD"),))
        encode, content_type = choose_encoder(headers.get("accept", ""))
        body = encode(self._registry)
        extra = [("Content-Type", content_type)]
        if "gzip" in headers.get("accept-encoding", ""):
            body = gzip.compress(body)
            extra.append(("Content-Encoding", "gzip"))
        return _response(HTTPStatus.OK, body, extra=extra, head_only=method == "HEAD")


def _response(
    status: HTTPStatus,
    body: bytes | None = None,
    *,
    extra: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (),
    head_only: bool = False,
) -> bytes:
    """A whole HTTP/1.1 response that closes its connection; an error's body is its reason phrase."""
    if body is None:
        body = f"{status.value} {status.phrase}\n".encode()
        extra = (("Content-Type", "text/plain; charset=utf-8"), *extra)
    lines = [
        f"HTTP/1.1 {status.value} {status.phrase}",
        *(f"{name}: {value}" for name, value in extra),
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (b"" if head_only else body)
