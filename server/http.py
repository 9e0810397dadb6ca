"""`--http-port`: HarnessService and ThreadService over Connect (JSON and binary) and gRPC-Web.

The Connect project's Python runtime (`connectrpc`) speaks the protocols: its generated ASGI
applications (`threadline.v1.*_connect`, from `buf generate`) route each method to a function of ours,
which calls the very behaviour the gRPC server calls (the servicers of `server.service` and
`server.threads`), with a context that answers what those behaviours ask of a gRPC one. So each RPC has
one code path behind two transports: its checks, limits, admission, logs and metrics are the same.

- Errors: a behaviour ends an RPC with `abort` (`server.mapping.errors`): the status's code, message and
  details (`ErrorInfo`, `BadRequest`) become a Connect error with the same details (Connect's error JSON,
  gRPC-Web's `grpc-status-details-bin`).
- Deadlines: `connect-timeout-ms` / `grpc-timeout` are the runtime's; a behaviour reads what is left with
  `time_remaining()`, and the runtime cancels it once the deadline passed, as grpc does.
- A client that goes away cancels its RPC (the runtime cancels the handler on the disconnect).
- `--token`: the same bearer token, checked before the body is read (`BearerToken`).
- Streams: responses already encoded for gRPC (`server.outbox`) are passed through by the binary codec
  and decoded once for JSON.
- CORS is off unless `--http-cors-origin` names the origins (Starlette's middleware), never `*`.
- `--console`: the web console's files (`server/console/`, built from console/ by `node console/build.mjs`)
  at `/`, same-origin with the services, under a Content-Security-Policy that lets the page load only
  its own files and call only this origin.

Uvicorn serves the application on the server's own event loop (HTTP/1.1; its signal handling left to
the server), so every RPC runs beside the gRPC ones, on the same loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import grpc
import grpc.aio
import uvicorn
from connectrpc.code import Code
from connectrpc.codec import Codec
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication
from google.protobuf import descriptor_pool, json_format
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import status_pb2
from grpc_status import rpc_status
from protobuf.wkt import Any as AnyDetail
from starlette.middleware.cors import CORSMiddleware
from threadline.v1 import harness_service_connect, thread_service_connect

from .errors import ServerError, ServerReason
from .listening import bound_socket
from .mapping.errors import to_status
from .metrics import CURRENT, TRANSPORT
from .tracing import CURRENT as TRACING
from .tracing import rpc_span

__all__ = ("CORS_HEADERS", "HttpGateway")

CORS_HEADERS = (
    "Authorization",
    "Content-Type",
    "Connect-Protocol-Version",
    "Connect-Timeout-Ms",
    "Grpc-Timeout",
    "X-Grpc-Web",
    "X-User-Agent",
)
"""What a browser's Connect or gRPC-Web client sends beside the body (allowed by CORS preflight)."""
_EXPOSED = ("Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin")

_CODES = {status: Code[status.name] for status in grpc.StatusCode if status.name in Code.__members__}
_CODES[grpc.StatusCode.CANCELLED] = Code.CANCELED

MAX_CONNECTIONS = 1024
"""Connections held at once; one more is answered 503 at once (uvicorn's `limit_concurrency`)."""
KEEP_ALIVE_S = 30.0


class _Encoded:
    """A stream response already encoded for gRPC (`server.outbox`), with the type it encodes."""

    __slots__ = ("data", "type")

    def __init__(self, data: bytes, type: type[Message]) -> None:
        self.data, self.type = data, type


class _Binary(Codec[Any, Any]):
    """Protobuf binary: an encoded response as it is (`connectrpc.compat`'s codec would need a message)."""

    def name(self) -> str:
        return "proto"

    def encode(self, message: Any) -> bytes:
        return message.data if type(message) is _Encoded else bytes(message.SerializeToString())

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        return _decoded(lambda: message_class.FromString(bytes(data)), message_class)


class _Json(Codec[Any, Any]):
    """Protobuf JSON (the proto3 mapping, field names in lowerCamelCase, compact), decoding an encoded
    response once; an unknown field is refused, not dropped, so a misspelt field is an error
    (`connectrpc.compat`'s codec ignores them and indents its output)."""

    def name(self) -> str:
        return "json"

    def encode(self, message: Any) -> bytes:
        if type(message) is _Encoded:
            message = message.type.FromString(message.data)
        return json_format.MessageToJson(message, indent=None).encode()

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        return _decoded(lambda: json_format.Parse(bytes(data), message_class()), message_class)


def _decoded(parse: Callable[[], Message], message_class: type[Message]) -> Message:
    """`parse()`, or the typed refusal of a body that is not one (as the gRPC port answers it)."""
    try:
        return parse()
    except Exception:  # json_format.ParseError, DecodeError: the body is at fault
        name = message_class.DESCRIPTOR.full_name
        raise _connect_error(
            ServerError(
                ServerReason.REQUEST_UNDECODABLE,
                f"The request body is not a valid encoding of `{name}`.",
                details={"type": name},
            )
        ) from None


def _connect_error(error: ServerError) -> ConnectError:
    """A server refusal as a Connect error with its details, counted like one the gRPC port answers."""
    if (metrics := CURRENT.get()) is not None:
        metrics.rpc_errors.labels(error.reason, TRANSPORT.get()).inc()
    status = rpc_status.to_status(to_status(error))
    return _from_grpc(status.code, status.details, status.trailing_metadata)


def _from_grpc(
    code: grpc.StatusCode, message: str, trailing: Sequence[tuple[str, Any]] | None
) -> ConnectError:
    details: list[ErrorDetail] = []
    for key, value in trailing or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            details = [ErrorDetail(AnyDetail(type_url=d.type_url, value=d.value)) for d in status.details]
    return ConnectError(_CODES.get(code, Code.UNKNOWN), message, details=details)


class _Aborted(grpc.aio.AbortError):
    """What `abort` raises on this transport: a gRPC abort to the behaviour (which lets it pass, as it
    does grpc's), the Connect error to the runtime."""

    def __init__(self, error: ConnectError) -> None:
        super().__init__(str(error))
        self.error = error


class _Context:
    """What the behaviours use of a `grpc.aio.ServicerContext`, over a Connect request."""

    def __init__(self, ctx: RequestContext[Any, Any]) -> None:
        self._ctx = ctx

    def time_remaining(self) -> float | None:
        remaining = self._ctx.timeout_ms
        return None if remaining is None else max(remaining / 1000, 0.0)

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Sequence[tuple[str, Any]] = ()
    ) -> NoReturn:
        raise _Aborted(_from_grpc(code, details, trailing_metadata))


class _Methods:
    """The functions a generated Connect application routes to, each calling the servicer's behaviour
    of the same method (`stream_run` → `StreamRun`)."""

    def __init__(self, servicer: object, service: str) -> None:
        descriptor = descriptor_pool.Default().FindServiceByName(service)
        self._functions: dict[str, Callable[..., Any]] = {}
        for method in descriptor.methods:
            behaviour = getattr(servicer, method.name)
            output: type[Message] = GetMessageClass(method.output_type)
            snake = "".join("_" + c.lower() if c.isupper() else c for c in method.name).lstrip("_")
            self._functions[snake] = (
                _stream(behaviour, output) if method.server_streaming else _unary(behaviour)
            )

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(name) from None


def _unary(behaviour: Callable[[Any, Any], Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, ctx: RequestContext[Any, Any]) -> Any:
        with _answered(), _traced(ctx):
            return await behaviour(request, _Context(ctx))

    return call


def _stream(behaviour: Callable[[Any, Any], AsyncIterator[Any]], output: type[Message]) -> Callable[..., Any]:
    async def call(request: Any, ctx: RequestContext[Any, Any]) -> AsyncIterator[Any]:
        with _answered(), _traced(ctx):
            responses = behaviour(request, _Context(ctx))
            try:
                async for response in responses:
                    yield _Encoded(response, output) if type(response) is bytes else response
            finally:
                with contextlib.suppress(Exception):
                    await responses.aclose()  # type: ignore[attr-defined]

    return call


def _traced(ctx: RequestContext[Any, Any]) -> contextlib.AbstractContextManager[None]:
    """The RPC's SERVER span when the server traces (`server.tracing`), labelled with its transport."""
    tracing = TRACING.get()
    if tracing is None:
        return contextlib.nullcontext()
    name = f"{ctx.method.service_name}/{ctx.method.name}"
    return rpc_span(tracing.tracer, name, ctx.request_headers, transport=TRANSPORT.get())


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    """A behaviour's abort as the Connect error it carries."""
    try:
        yield
    except _Aborted as aborted:
        raise aborted.error from None


class BearerToken:
    """`--token` on the HTTP port: `authorization: Bearer <token>` on every RPC, before its body is read."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def on_start(self, ctx: RequestContext[Any, Any]) -> None:
        presented = ctx.request_headers.get("authorization")
        if presented is None:
            raise _connect_error(
                ServerError(
                    ServerReason.TOKEN_MISSING, "This server needs `authorization: Bearer <token>` metadata."
                )
            )
        if not hmac.compare_digest(presented.encode(), self._expected):
            raise _connect_error(ServerError(ServerReason.TOKEN_INVALID, "The bearer token is not valid."))

    async def on_end(self, token: None, ctx: RequestContext[Any, Any], error: Exception | None, /) -> None:
        return None


CONSOLE = Path(__file__).resolve().parent / "console"
"""The web console as built (`node console/build.mjs`), shipped in the package."""
_CONSOLE_FILES = {"/": "index.html", "/console.js": "console.js", "/console.css": "console.css"}
_CONSOLE_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
}
_CONSOLE_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
]


def console_files() -> dict[str, tuple[bytes, bytes]]:
    """The console's files by path, with their content types.

    Raises:
        OSError: a file is missing (the console was not built).
    """
    return {
        path: (_CONSOLE_TYPES[Path(name).suffix], (CONSOLE / name).read_bytes())
        for path, name in _CONSOLE_FILES.items()
    }


class _Router:
    """The services' applications by path prefix, the console's files (when served); anything else is 404."""

    def __init__(
        self, apps: Sequence[ConnectASGIApplication[Any]], console: dict[str, tuple[bytes, bytes]] | None
    ) -> None:
        self._console = console or {}
        self._apps = [(app.path + "/", app) for app in apps]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # HTTP only: Uvicorn runs with `lifespan="off"`, so no other scope reaches here.
        path: str = scope.get("path", "")
        if _is_grpc(scope):
            await _refuse_grpc(send)
            return
        TRANSPORT.set(_transport(scope))  # this request's task, and the tasks it starts
        for prefix, app in self._apps:
            if path.startswith(prefix):
                await app(scope, receive, send)
                return
        page = self._console.get(path)
        if page is not None and scope.get("method") in ("GET", "HEAD"):
            kind, body = page
            headers = [(b"content-type", kind), *_CONSOLE_HEADERS]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
            return
        await send(
            {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]}
        )
        await send(
            {"type": "http.response.body", "body": b"Not found: this port serves threadline.v1 RPCs.\n"}
        )


def _content_type(scope: Any) -> bytes:
    for key, value in scope.get("headers", ()):
        if key == b"content-type":
            return bytes(value).lower()
    return b""


def _transport(scope: Any) -> str:
    return "grpc-web" if _content_type(scope).startswith(b"application/grpc-web") else "connect"


def _is_grpc(scope: Any) -> bool:
    """gRPC proper (not gRPC-Web): it needs HTTP/2 trailers, which this HTTP/1.1 port cannot send."""
    kind = _content_type(scope)
    return kind.startswith(b"application/grpc") and not kind.startswith(b"application/grpc-web")


async def _refuse_grpc(send: Any) -> None:
    """415, with the status in the headers as gRPC's trailers-only answer puts it (UNIMPLEMENTED)."""
    message = b"This%20port%20speaks%20Connect%20and%20gRPC-Web%3B%20gRPC%20is%20on%20the%20gRPC%20port."
    await send(
        {
            "type": "http.response.start",
            "status": 415,
            "headers": [
                (b"content-type", b"text/plain"),
                (b"grpc-status", b"12"),
                (b"grpc-message", message),
            ],
        }
    )
    await send(
        {
            "type": "http.response.body",
            "body": b"gRPC is served on the gRPC port; this port speaks Connect and gRPC-Web.\n",
        }
    )


class _Server(uvicorn.Server):
    """Uvicorn without its signal handlers: the server's own stop the HTTP port too."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpGateway:
    """The HTTP port of one server: `await start(host, port)`, then `await close()`."""

    def __init__(
        self,
        harness: object,
        threads: object | None,
        *,
        token: str | None,
        cors_origins: Sequence[str],
        max_message_bytes: int,
        tls: tuple[Path, Path] | None = None,
        console: bool = False,
    ) -> None:
        """`tls`: the gRPC port's certificate chain and key files; the HTTP port then speaks HTTPS.
        `console`: serve the web console at `/`.

        Raises:
            OSError: `console`, and the console's files are not there (not built).
        """
        self._tls = tls
        interceptors = (BearerToken(token),) if token else ()
        common: dict[str, Any] = {
            "interceptors": interceptors,
            "read_max_bytes": max_message_bytes,
            "codecs": (_Binary(), _Json()),
        }
        apps: list[ConnectASGIApplication[Any]] = [
            harness_service_connect.HarnessServiceASGIApplication(
                _Methods(harness, "threadline.v1.HarnessService"), **common
            )
        ]
        if threads is not None:
            apps.append(
                thread_service_connect.ThreadServiceASGIApplication(
                    _Methods(threads, "threadline.v1.ThreadService"), **common
                )
            )
        app: Any = _Router(apps, console_files() if console else None)
        if cors_origins:
            app = CORSMiddleware(
                app,
                allow_origins=list(cors_origins),
                allow_methods=["POST", "GET"],
                allow_headers=list(CORS_HEADERS),
                expose_headers=list(_EXPOSED),
                allow_credentials=False,
                max_age=7200,
            )
        self._app = app
        self._server: _Server | None = None
        self._task: asyncio.Future[None] | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on `host:port` (0 = a free port); returns the bound port.

        Raises:
            OSError: The address cannot be bound.
        """
        listener = await bound_socket(host, port)
        config = uvicorn.Config(
            self._app,
            lifespan="off",
            log_config=None,
            access_log=False,
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=int(KEEP_ALIVE_S),
            server_header=False,
            ssl_certfile=None if self._tls is None else str(self._tls[0]),
            ssl_keyfile=None if self._tls is None else str(self._tls[1]),
        )
        self._server = _Server(config)
        self._task = asyncio.ensure_future(self._server.serve(sockets=[listener]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise OSError(f"the HTTP port {host}:{port} did not start")
            await asyncio.sleep(0.01)
        return int(listener.getsockname()[1])

    async def close(self, grace: float = 0.0) -> None:
        """Stop accepting, give open requests `grace` seconds, then close every connection."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=max(grace, 0.0) + 1.0)
        except TimeoutError:
            self._server.force_exit = True
            with contextlib.suppress(BaseException):
                await self._task
        self._server = self._task = None
