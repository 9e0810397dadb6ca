"""`Client`: one connection to a Threadline server, and every `HarnessService` call on it.

The connection is a grpclib channel (HTTP/2) opened on first use and closed by `aclose()` or by
leaving `async with`; `client.threads` (`ThreadService`) shares it. Every call has a deadline (the
client's `timeout` unless the call names its own; `None` waits forever). Each failure surfaces as
`ThreadlineError`: a `ProtocolError` when the SDK finds the server's answer breaking the contract.
Cancelling the task that awaits a call cancels the RPC and, for `HarnessService` runs, the run on
the server.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self, Unpack

import grpclib.client
from grpclib.encoding.proto import ProtoCodec, ProtoStatusDetailsCodec

from ._calls import UNSET, EventStream, Timeout, missing, raise_translated
from ._checkpoints import HistoryRebuilder, delta_base
from ._children import ChildRunOptions, child_request, child_spec
from ._errors import ProtocolError
from ._gen.threadline.v1 import (
    CapabilityState,
    CheckpointForm,
    ChildAction,
    DeferredToolCall,
    DeferredToolResume,
    EnvironmentState,
    ForkStateRequest,
    GetServerInfoResponse,
    HarnessServiceStub,
    HarnessState,
    MessageHistory,
    NewStateRequest,
    RemainingDeferredRequest,
    RunEvent,
    RunRequest,
    RunResult,
    RunSpec,
    StreamRunRequest,
    StreamRunResponse,
    ThreadServiceStub,
    ValidateStateRequest,
)
from ._threads import Threads
from ._tracing import Metadata, call_metadata

__all__ = ("DEFAULT_TARGET", "DEFAULT_TIMEOUT", "Client", "RunStream", "ValidatedState")

DEFAULT_TARGET: Final = "127.0.0.1:50051"
"""Where `threadline serve` listens by default."""
DEFAULT_TIMEOUT: Final = 30.0
"""Seconds a call may take unless the client or the call says otherwise; nothing waits forever."""
_DEFAULT_MAX_EVENTS_PER_MESSAGE: Final = 64
"""How many events one `StreamRun` response may carry unless the client says otherwise."""
_MAX_UINT32: Final = 2**32 - 1  # the field is a uint32 on the wire


@dataclass(frozen=True, slots=True)
class ValidatedState:
    """What `Client.validate_state` returns: one state in both of its stored forms."""

    state: HarnessState
    """The envelope as the server re-encoded it; store this form."""
    state_json: str
    """The harness state JSON (SPEC §2.1.2), byte-identical for equal states."""


class _Codec(ProtoCodec):
    """grpclib's protobuf codec, except that a response that does not decode is a `ProtocolError`.

    betterproto2's parser raises whatever the bytes trip (`KeyError`, `EOFError`, `ValueError`, ...)
    and grpclib passes that on as it is; grpclib resets the call's stream on the way out.
    """

    def decode(self, data: bytes, message_type: type[Any]) -> Any:  # Any: grpclib's IProtoMessage
        try:
            return super().decode(data, message_type)
        except Exception as exc:
            raise ProtocolError(f"the server's {message_type.__name__} does not decode: {exc!r}") from exc


def _parse_target(target: str) -> tuple[str, int, bool]:
    """`host:port`, `[v6]:port` or a bare host (port 50051), optionally after `http://` or
    `https://`; the flag says whether the scheme asked for TLS."""
    scheme, sep, rest = target.partition("://")
    if not sep:
        scheme, rest = "", target
    elif scheme not in ("http", "https"):
        raise ValueError(f"unsupported scheme in target {target!r}; use 'host:port' or http(s)://")
    rest = rest.rstrip("/")
    if rest.startswith("["):
        host, _, after = rest[1:].partition("]")
        port = after.removeprefix(":")
    elif rest.count(":") == 1:
        host, _, port = rest.partition(":")
    else:
        host, port = rest, ""
    if not host:
        raise ValueError(f"no host in target {target!r}; expected 'host:port'")
    try:
        return host, int(port) if port else 50051, scheme == "https"
    except ValueError:
        raise ValueError(f"invalid port in target {target!r}; expected 'host:port'") from None


class Client:
    """A Threadline host's connection to a server.

    ```python
    async with Client("127.0.0.1:50051") as client:
        result = await client.run(RunSpec(text="hello"))
        async for event in client.stream_run(RunSpec(text="lookup grpc", previous_state=result.state)):
            ...
    ```

    Args:
        target: `host:port` of the server (IPv6 as `[::1]:50051`); an `https://` prefix turns TLS on
            unless `tls` says otherwise.
        token: A bearer token sent as `authorization: Bearer <token>` on every call (`threadline serve
            --token`). Default: none.
        tls: `True` for TLS with the system's trust store, an `ssl.SSLContext` for your own (e.g.
            `ssl.create_default_context(cafile="ca.pem")`; the client sets its ALPN protocol to
            `h2`), or `None`/`False` for plaintext (loopback and trusted networks only).
        timeout: Default deadline of every call, in seconds, runs included; `None` = no deadline.
            A call can override it with its own `timeout=`.
        max_events_per_message: How many events one `stream_run` (or `threads.stream`) response
            may carry (`StreamRunRequest.max_events_per_message`). The server packs only events that are
            already waiting when the reader falls behind, so nothing is delayed; the stream still
            yields one event at a time. 0 or 1 turns packing off; the server takes at most 256.

    Raises:
        ValueError: `max_events_per_message` is not a non-negative int (up to 2**32 - 1).
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: bool | ssl.SSLContext | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_events_per_message: int = _DEFAULT_MAX_EVENTS_PER_MESSAGE,
    ) -> None:
        self._host, self._port, https = _parse_target(target)
        if (
            isinstance(max_events_per_message, bool)
            or not isinstance(max_events_per_message, int)
            or not 0 <= max_events_per_message <= _MAX_UINT32
        ):
            raise ValueError(
                f"max_events_per_message must be a non-negative int, got {max_events_per_message!r}"
            )
        self._max_events_per_message = max_events_per_message
        if tls is None and https:
            tls = True
        if isinstance(tls, ssl.SSLContext):
            # gRPC runs on HTTP/2, which TLS negotiates through ALPN; grpclib sets it only on the
            # context it makes itself (tls=True).
            tls.set_alpn_protocols(["h2"])
        self._tls: bool | ssl.SSLContext | None = tls or None
        self._auth_metadata: Metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._timeout = timeout
        self._channel: grpclib.client.Channel | None = None
        self._stub: HarnessServiceStub | None = None
        self._thread_stub: ThreadServiceStub | None = None
        self._closed = False

    @property
    def target(self) -> str:
        """The server's `host:port`."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self._port}"

    def __repr__(self) -> str:
        return f"Client({self.target!r})"

    async def __aenter__(self) -> Self:
        self._connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; calls in flight fail. Idempotent."""
        self._closed = True
        channel, self._channel, self._stub, self._thread_stub = self._channel, None, None, None
        if channel is None:
            return
        # grpclib keeps the asyncio transport on its (private) protocol objects; read it defensively.
        transport = getattr(
            getattr(getattr(channel, "_protocol", None), "connection", None), "_transport", None
        )
        channel.close()
        if self._tls and isinstance(transport, asyncio.Transport):
            # A TLS transport's close() waits for the peer's close_notify, which grpc servers do
            # not always send, leaving the socket open past the event loop. The channel is gone
            # either way, so cut the connection now.
            transport.abort()

    def _connect(self) -> HarnessServiceStub:
        # grpclib binds the channel to the running event loop, so it is created inside one.
        if self._closed:
            raise RuntimeError("this Client is closed")
        if self._stub is None:
            self._channel = grpclib.client.Channel(
                self._host,
                self._port,
                ssl=self._tls,
                codec=_Codec(),
                # Given a codec, grpclib no longer picks the details codec itself.
                status_details_codec=ProtoStatusDetailsCodec(),
            )
            self._stub = HarnessServiceStub(self._channel)
            self._thread_stub = ThreadServiceStub(self._channel)
        return self._stub

    def _connect_threads(self) -> ThreadServiceStub:
        self._connect()
        assert self._thread_stub is not None  # made with the channel
        return self._thread_stub

    def _deadline(self, timeout: Timeout) -> float | None:
        return self._timeout if timeout is UNSET else timeout

    def _call_metadata(self) -> Metadata | None:
        """The metadata of a call made now: the token, and the host's current trace context."""
        return call_metadata(self._auth_metadata)

    @functools.cached_property
    def threads(self) -> Threads:
        """`ThreadService` on this connection: durable threads the server keeps (`Threads`).

        It shares the client's channel, token, TLS and default timeout, and closes with it.
        """
        return Threads(self)

    # --- runs ----------------------------------------------------------------------------------

    def stream_run(self, spec: RunSpec, *, timeout: Timeout = UNSET) -> RunStream:
        """Run the agent and stream its events, the terminal `result` event last.

        ```python
        async with client.stream_run(spec) as stream:
            async for event in stream:
                ...
        result = stream.result
        ```
        `async for event in client.stream_run(spec)` works too; leaving the loop early cancels
        the run (the stream closes when it is garbage-collected, or at once inside `async with`).

        With `spec.checkpoints` set and `spec.checkpoint_form` left unspecified, the run asks for
        `CHECKPOINT_FORM_DELTA` (on a copy of `spec`), so candidates travel as history deltas and
        add up to what the run adds instead of its square. Either way every `checkpoint_candidate`
        the stream yields holds a complete state: the stream rebuilds each delta's
        `message_history.data` and checks it against `message_history.sha256` first. An explicit
        `CHECKPOINT_FORM_FULL` or `CHECKPOINT_FORM_DELTA` is sent as given.

        Args:
            spec: What to run.
            timeout: Deadline of the whole run in seconds; default the client's.

        Raises:
            ThreadlineError: While iterating, when the server rejects the run before it starts
                or the run's core fails after it started (no `result` event then).
            ProtocolError: While iterating, when the server's answer breaks the contract: a
                candidate's delta does not rebuild its history, a response has no event, or the
                stream ends without its `result` event.
        """
        stub = self._connect()
        if spec.checkpoints and spec.checkpoint_form == CheckpointForm.UNSPECIFIED:
            spec = _with_form(spec, CheckpointForm.DELTA)
        request = StreamRunRequest(spec=spec, max_events_per_message=self._max_events_per_message)
        return RunStream(
            stub.stream_run(request, timeout=self._deadline(timeout), metadata=self._call_metadata()),
            spec=spec,
        )

    async def run(self, spec: RunSpec, *, timeout: Timeout = UNSET) -> RunResult:
        """Run the agent and return only its terminal result.

        Args:
            spec: What to run (`spec.checkpoints` is ignored).
            timeout: Deadline of the whole run in seconds; default the client's.

        Returns:
            The result: COMPLETED, SUSPENDED (answer `result.deferred`), FAILED or CANCELLED.

        Raises:
            ThreadlineError: The server rejected the run before it started, or its core failed.
            ProtocolError: The response breaks the contract (e.g. it has no result).
        """
        stub = self._connect()
        try:
            response = await stub.run(
                RunRequest(spec=spec), timeout=self._deadline(timeout), metadata=self._call_metadata()
            )
        except Exception as exc:
            raise_translated(exc)
        if response.result is None:  # pragma: no cover - the server always sets it
            raise missing("RunResponse.result")
        return response.result

    async def run_child(
        self,
        call: DeferredToolCall,
        *,
        state: HarnessState | None = None,
        deferred_resume: DeferredToolResume | None = None,
        timeout: Timeout = UNSET,
        **options: Unpack[ChildRunOptions],
    ) -> RunResult:
        """Run a Host-managed child a suspended parent asks for, on the child's own thread.

        Without `state` (a `CHILD_ACTION_START` request) it first makes the child's envelope with
        `new_state(thread_id=child.thread_id)`; otherwise it runs on the state given: the child's
        saved state for a `CHILD_ACTION_CONTINUE` request, or the suspended child's state with
        `deferred_resume` answering it. Then `run(child_spec(call, state, ...))`. It keeps
        nothing: persist the result's state, and answer the parent with `child_answer(call,
        result)` once the child has ended. Stream a child with `stream_run(child_spec(...))`.

        Args:
            call: An item of `child_calls(parent.deferred)`.
            state: The child thread's state; `None` only to start a new child.
            deferred_resume: The answers to the child's own suspended batch.
            timeout: Deadline of each call in seconds; default the client's.
            **options: `checkpoints`, `tool_recovery`, `usage_limits`, `client_tools`,
                `deferred_tools`, `request_id` of the child's run (`ChildRunOptions`).

        Returns:
            The child's result: COMPLETED, SUSPENDED (answer it and run it again), FAILED or
            CANCELLED.

        Raises:
            ValueError: `call` is no child request, a `CHILD_ACTION_CONTINUE` request or a
                `deferred_resume` comes without the child's state, or the state is another thread's.
            ThreadlineError: As `run` raises (e.g. `CHILD_EDGE_UNKNOWN`, `CHILD_LINEAGE_INVALID`).
        """
        child = child_request(call, "run_child")
        if state is None:
            if child.action != ChildAction.START or deferred_resume is not None:
                raise ValueError(
                    f"child {child.thread_id} exists already ({child.action!s}"
                    f"{', answering its calls' if deferred_resume is not None else ''}): pass its saved state"
                )
            state = await self.new_state(thread_id=child.thread_id, timeout=timeout)
        spec = child_spec(call, state, deferred_resume=deferred_resume, **options)
        return await self.run(spec, timeout=timeout)

    # --- envelopes -------------------------------------------------------------------------------

    async def new_state(
        self,
        *,
        thread_id: str = "",
        message_history: MessageHistory | None = None,
        capability_states: Sequence[CapabilityState] = (),
        environment_states: Sequence[EnvironmentState] = (),
        timeout: Timeout = UNSET,
    ) -> HarnessState:
        """Create the envelope of a new thread, e.g. to choose its thread ID before the first run.

        Args:
            thread_id: The new thread's ID; empty = a server-generated `thread_<32 hex>`.
            message_history: A history to start from; default empty.
            capability_states: Capability state namespaces to start with, in order.
            environment_states: Environment states to start with, in order.
            timeout: Deadline in seconds; default the client's.
        """
        stub = self._connect()
        request = NewStateRequest(
            thread_id=thread_id,
            message_history=message_history,
            capability_states=list(capability_states),
            environment_states=list(environment_states),
        )
        try:
            response = await stub.new_state(
                request, timeout=self._deadline(timeout), metadata=self._call_metadata()
            )
        except Exception as exc:
            raise_translated(exc)
        if response.state is None:  # pragma: no cover
            raise missing("NewStateResponse.state")
        return response.state

    async def fork_state(
        self, state: HarnessState, *, thread_id: str = "", timeout: Timeout = UNSET
    ) -> HarnessState:
        """Branch a thread from a checkpoint: a new thread ID with the same history and state.

        Args:
            state: The checkpoint to branch from.
            thread_id: The new thread's ID; empty = server-generated. The source's own ID fails
                with `FORK_THREAD_ID_CONFLICT`.
            timeout: Deadline in seconds; default the client's.
        """
        stub = self._connect()
        try:
            response = await stub.fork_state(
                ForkStateRequest(state=state, thread_id=thread_id),
                timeout=self._deadline(timeout),
                metadata=self._call_metadata(),
            )
        except Exception as exc:
            raise_translated(exc)
        if response.state is None:  # pragma: no cover
            raise missing("ForkStateResponse.state")
        return response.state

    async def validate_state(self, state: HarnessState | str, *, timeout: Timeout = UNSET) -> ValidatedState:
        """Check a stored state exactly as a run would, without running anything.

        Args:
            state: An envelope, or the harness state JSON text.
            timeout: Deadline in seconds; default the client's.

        Returns:
            The state in both forms, as the server re-encoded it.

        Raises:
            ThreadlineError: The state does not load (e.g. `SCHEMA_VERSION_UNSUPPORTED`,
                `STATE_INVALID`).
        """
        stub = self._connect()
        request = (
            ValidateStateRequest(state_json=state)
            if isinstance(state, str)
            else ValidateStateRequest(state=state)
        )
        try:
            response = await stub.validate_state(
                request, timeout=self._deadline(timeout), metadata=self._call_metadata()
            )
        except Exception as exc:
            raise_translated(exc)
        if response.state is None:  # pragma: no cover
            raise missing("ValidateStateResponse.state")
        return ValidatedState(state=response.state, state_json=response.state_json)

    async def remaining_deferred(
        self, resume: DeferredToolResume, state: HarnessState, *, timeout: Timeout = UNSET
    ) -> DeferredToolResume | None:
        """The part of an accepted resume that a checkpoint's history has not incorporated yet.

        A host that publishes checkpoints mid-run stores this beside each one.

        Returns:
            The remaining resume, or `None` when nothing remains.
        """
        stub = self._connect()
        try:
            response = await stub.remaining_deferred(
                RemainingDeferredRequest(resume=resume, state=state),
                timeout=self._deadline(timeout),
                metadata=self._call_metadata(),
            )
        except Exception as exc:
            raise_translated(exc)
        return response.remaining

    async def get_server_info(self, *, timeout: Timeout = UNSET) -> GetServerInfoResponse:
        """What the server supports: state versions, history formats, agents and their tools, limits."""
        stub = self._connect()
        try:
            return await stub.get_server_info(timeout=self._deadline(timeout), metadata=self._call_metadata())
        except Exception as exc:
            raise_translated(exc)


class RunStream(EventStream):
    """The events of one `StreamRun` call; iterate it once.

    It yields one event at a time, in `sequence` order, whether a response carried a single
    `event` or several packed in `events` (the rest of a packed response waits here until read).
    Use it as `async with` to close the call (and cancel the run) as soon as the block exits, even
    when the loop stopped early. `result` holds the terminal `RunResult` once it has arrived.

    A checkpoint candidate that arrives as a `history_delta` (CHECKPOINT_FORM_DELTA) is yielded
    with its `message_history.data` rebuilt and checked against its `sha256`; `history_delta`
    stays in place. A delta that does not rebuild (wrong digest, `keep_bytes` beyond its base) ends
    the stream and cancels the call with a `ProtocolError`; so does a response without events. A
    stream that ends without its `result` event raises `ProtocolError` where it ends.

    Args:
        responses: The call's responses (`HarnessServiceStub.stream_run`).
        spec: The spec the call sent; its `previous_state` is the base of the first delta
            candidate. `None` = a run sent without a previous state.
    """

    def __init__(self, responses: AsyncIterator[StreamRunResponse], *, spec: RunSpec | None = None) -> None:
        super().__init__(responses)
        self._spec = spec
        self._history: HistoryRebuilder | None = None  # made at the first delta candidate

    async def _accept(self, event: RunEvent) -> None:
        candidate = event.checkpoint_candidate
        if candidate is None or candidate.history_delta is None:
            return
        if self._history is None:
            self._history = HistoryRebuilder(delta_base(self._spec))
        try:
            self._history.rebuild(event.sequence, candidate.state, candidate.history_delta)
        except ProtocolError:
            await self._abandon()
            raise

    async def collect(self) -> RunResult:
        """Read the remaining events and return the terminal result.

        Raises:
            ThreadlineError: As iterating does (`ProtocolError` when the stream ends without a result).
            RuntimeError: The stream was closed, or an error ended it, before its result.
        """
        return await self._drain()

    async def aclose(self) -> None:
        """Stop reading; an unfinished run is cancelled on the server. Idempotent."""
        await super().aclose()


def _with_form(spec: RunSpec, form: CheckpointForm) -> RunSpec:
    """A shallow copy of the host's spec with another `checkpoint_form`; the host's stays as it was."""
    sent = copy.copy(spec)
    sent._unknown_fields = spec._unknown_fields  # copy.copy drops the fields of a newer contract
    sent.checkpoint_form = form
    return sent
