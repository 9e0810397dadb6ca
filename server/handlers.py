"""Method handlers built from a servicer, so that a request body that is not protobuf gets a typed answer.

grpc.aio decodes a request with the handler's `request_deserializer` before any servicer code runs.
A body that does not decode (one stray byte, a bit flip, invalid UTF-8 in a string field) raises
there, and grpc answers UNKNOWN "Unexpected DecodeError" with the exception's text and logs nothing
of ours. So each handler built here decodes through a guard that turns the failure into a marker
value, and its behaviour answers the marker with INVALID_ARGUMENT `REQUEST_UNDECODABLE` (ErrorInfo
metadata `method`, `type`) and one `request_undecodable` log line; a decodable request reaches the
servicer unchanged.

The handlers are derived from the service descriptor (every method, its request and response types,
its streaming shape), so a new RPC in the contract is covered without an edit here. Behaviours that
are coroutines or async generators are guarded; a plain function (grpc runs it in a thread, e.g. the
health servicer's `List`, which only answers UNIMPLEMENTED) keeps grpc's own decoding. Requests that
stream from the client are not guarded either: no service of ours takes one.

A server-streaming behaviour is wrapped as a coroutine that writes each response itself, which is
what grpc does for an async generator anyway, so the guard adds no work per streamed message.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from .errors import ServerError, ServerReason
from .mapping.errors import abort
from .runlog import LOGGER

__all__ = ("add_service", "service_handlers")

_Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(frozen=True, slots=True)
class _Undecodable:
    """What a guarded deserializer returns for a body its message type cannot read."""

    size: int
    """The body's length in bytes (logged; the bytes themselves are not)."""


def _guarded(parse: Callable[[bytes], Message]) -> Callable[[bytes], Message | _Undecodable]:
    def deserialize(data: bytes) -> Message | _Undecodable:
        try:
            return parse(data)
        except Exception:  # DecodeError in practice; whatever fails to read these bytes, they are the fault
            return _Undecodable(len(data))

    return deserialize


def _refusal(method: str, type_name: str) -> Callable[[_Undecodable, _Context], Any]:
    """The coroutine that answers an undecodable body of `method` with its typed status."""
    error = ServerError(
        ServerReason.REQUEST_UNDECODABLE,
        f"The request body is not a valid protobuf encoding of `{type_name}`.",
        details={"method": method, "type": type_name},
    )

    async def refuse(request: _Undecodable, context: _Context) -> None:
        LOGGER.warning(
            "request_undecodable",
            extra={"fields": {"method": method, "type": type_name, "bytes": request.size}},
        )
        await abort(context, error)  # counted and traced like every other refusal

    return refuse


def _handler(
    servicer: object, service: ServiceDescriptor, method: MethodDescriptor
) -> grpc.RpcMethodHandler[Any, Any]:
    behaviour = getattr(servicer, method.name)
    request_type: type[Message] = GetMessageClass(method.input_type)
    serialize = GetMessageClass(method.output_type).SerializeToString
    guardable = not method.client_streaming and (
        inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)
    )
    if method.client_streaming and method.server_streaming:
        return grpc.stream_stream_rpc_method_handler(behaviour, request_type.FromString, serialize)
    if method.client_streaming:
        return grpc.stream_unary_rpc_method_handler(behaviour, request_type.FromString, serialize)
    if not guardable:
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        return make(behaviour, request_type.FromString, serialize)

    refuse = _refusal(f"/{service.full_name}/{method.name}", request_type.DESCRIPTOR.full_name)
    deserialize = _guarded(request_type.FromString)
    if not method.server_streaming:

        async def unary(request: Any, context: _Context) -> Any:
            if type(request) is _Undecodable:
                await refuse(request, context)
            return await behaviour(request, context)

        return grpc.unary_unary_rpc_method_handler(unary, deserialize, serialize)

    if inspect.isasyncgenfunction(behaviour):

        async def stream(request: Any, context: _Context) -> None:
            if type(request) is _Undecodable:
                await refuse(request, context)
            async for response in behaviour(request, context):
                await context.write(response)

    else:

        async def stream(request: Any, context: _Context) -> None:
            if type(request) is _Undecodable:
                await refuse(request, context)
            await behaviour(request, context)

    return grpc.unary_stream_rpc_method_handler(stream, deserialize, _passing(serialize))


def _passing(serialize: Callable[[Message], bytes]) -> Callable[[Message | bytes], bytes]:
    """A stream's serializer that sends a response already encoded (`server.outbox`) as it is."""

    def serialized(response: Message | bytes) -> bytes:
        return response if type(response) is bytes else serialize(response)  # type: ignore[arg-type]

    return serialized


def service_handlers(
    servicer: object, service: ServiceDescriptor
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """One handler per method of `service`, each calling `servicer`'s method of the same name.

    Raises:
        AttributeError: `servicer` lacks one of the service's methods.
    """
    return {method.name: _handler(servicer, service, method) for method in service.methods}


def add_service(server: grpc.aio.Server, servicer: object, name: str) -> None:
    """Serve `servicer` as the service `name` (its generated module imported), guarded.

    This replaces the generated `add_*Servicer_to_server`, which registers unguarded handlers.
    """
    service = descriptor_pool.Default().FindServiceByName(name)
    handlers = service_handlers(servicer, service)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
