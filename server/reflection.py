"""Server reflection, v1 and v1alpha, answered from the contract's descriptors with their comments.

Generic clients (grpcurl, grpcui, `buf curl`, a reflection-only host) resolve every service the
server lists, and every message or method symbol, then show the contract's documentation. grpcio's
own reflection servicer cannot: it re-serialises descriptors from a `DescriptorPool`, and upb pools
drop `source_code_info` and find no method symbols (`threadline.v1.HarnessService.StreamRun`);
grpcio-reflection also has no `grpc.reflection.v1` descriptor to describe the v1 name it answers on.

So the server keeps the serialised `FileDescriptorProto`s themselves and answers from them:

- the contract and the `google.rpc` details its error statuses carry, with comments (both service
  files import `google/rpc/error_details.proto`, so a client that resolves details only from the
  called service's files, as grpcui does, decodes them too): `threadline/v1/descriptors.binpb`, the
  `FileDescriptorSet` that
  scripts/generate.sh builds from `proto/` and `third_party/` (`buf build`, source info kept) into
  the generated `threadline` package, imports included;
- every other listed service from the default pool (health, reflection v1alpha), without comments;
- `grpc.reflection.v1`, derived from v1alpha: the two packages are wire-identical, so one servicer
  answers on both names, and the derived file describes exactly what the v1 name accepts.

A response carries the requested file and its transitive imports, as grpcio's servicer does.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from importlib import resources

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2

__all__ = ("REFLECTION_SERVICES", "Catalogue", "add_reflection", "catalogue")

V1ALPHA = "grpc.reflection.v1alpha.ServerReflection"
V1 = "grpc.reflection.v1.ServerReflection"
REFLECTION_SERVICES = (V1, V1ALPHA)
"""The names reflection answers on; `add_reflection` lists them beside the server's own services."""

CONTRACT_DESCRIPTORS = "descriptors.binpb"
"""The contract's `FileDescriptorSet` inside the generated `threadline.v1` package."""

FileProto = descriptor_pb2.FileDescriptorProto


class Catalogue:
    """Serialised file descriptors by name, and the file that defines each symbol and extension."""

    def __init__(self, files: Iterable[FileProto]) -> None:
        """Index `files`; the first file of a name wins.

        Raises:
            ValueError: A file imports one that is not in `files`, or the files do not load
                together into a descriptor pool (a client could not build them either).
        """
        self._files: dict[str, FileProto] = {}
        self._serialized: dict[str, bytes] = {}
        self._symbols: dict[str, str] = {}
        self._extensions: dict[tuple[str, int], str] = {}
        self._messages: set[str] = set()
        self._services: set[str] = set()
        for file in files:
            if file.name not in self._files:
                self._add(file)
        for file in self._files.values():
            missing = [name for name in file.dependency if name not in self._files]
            if missing:
                raise ValueError(f"{file.name} imports {', '.join(missing)}, which reflection does not have")
        pool = descriptor_pool.DescriptorPool()
        loaded: set[str] = set()
        for name in self._files:
            for file in self._with_imports(name, loaded):
                pool.Add(file)

    def _add(self, file: FileProto) -> None:
        self._files[file.name] = file
        self._serialized[file.name] = file.SerializeToString()
        package = f"{file.package}." if file.package else ""
        for symbol in _symbols(file, package):
            self._symbols.setdefault(symbol, file.name)
        for scope, message in _messages(file.message_type, package):
            self._messages.add(f"{scope}{message.name}")
        for extension in _extensions(file, package):
            self._extensions.setdefault((extension.extendee.lstrip("."), extension.number), file.name)
        self._services.update(f"{package}{service.name}" for service in file.service)

    def _with_imports(self, name: str, seen: set[str]) -> Iterator[FileProto]:
        """`name`'s imports not yet in `seen` (depth first, each before its importers), then `name`."""
        if name in seen:
            return
        seen.add(name)
        file = self._files[name]
        for dependency in file.dependency:
            yield from self._with_imports(dependency, seen)
        yield file

    def has_service(self, name: str) -> bool:
        """Whether `name` is a service of a file in the catalogue."""
        return name in self._services

    def file_by_name(self, name: str) -> list[bytes] | None:
        """`name` serialised, then its transitive imports; `None` for an unknown file."""
        if name not in self._files:
            return None
        ordered = [file.name for file in self._with_imports(name, set())]
        return [self._serialized[each] for each in (ordered[-1], *ordered[:-1])]

    def file_containing_symbol(self, symbol: str) -> list[bytes] | None:
        """The file defining `symbol` (a package, message, field, oneof, enum, value, service,
        method or extension, fully qualified), with its imports; `None` when no file defines it."""
        name = self._symbols.get(symbol.lstrip("."))
        return None if name is None else self.file_by_name(name)

    def file_containing_extension(self, containing_type: str, number: int) -> list[bytes] | None:
        """The file declaring extension `number` of `containing_type`, with its imports."""
        name = self._extensions.get((containing_type.lstrip("."), number))
        return None if name is None else self.file_by_name(name)

    def extension_numbers(self, containing_type: str) -> list[int] | None:
        """The extension numbers declared for a message; `None` when the message is unknown."""
        message = containing_type.lstrip(".")
        if message not in self._messages:
            return None
        return sorted(number for extendee, number in self._extensions if extendee == message)


def _messages(
    messages: Iterable[descriptor_pb2.DescriptorProto], scope: str
) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    """Every message, nested ones included, with the scope its name is qualified by."""
    for message in messages:
        yield scope, message
        yield from _messages(message.nested_type, f"{scope}{message.name}.")


def _enums(file: FileProto, package: str) -> Iterator[tuple[str, descriptor_pb2.EnumDescriptorProto]]:
    yield from ((package, enum) for enum in file.enum_type)
    for scope, message in _messages(file.message_type, package):
        yield from ((f"{scope}{message.name}.", enum) for enum in message.enum_type)


def _extensions(file: FileProto, package: str) -> Iterator[descriptor_pb2.FieldDescriptorProto]:
    yield from file.extension
    for _, message in _messages(file.message_type, package):
        yield from message.extension


def _symbols(file: FileProto, package: str) -> Iterator[str]:
    """Every fully qualified name `file` defines, as protobuf scopes them.

    Enum values are siblings of their enum (`threadline.v1.RUN_STATUS_COMPLETED`), as protobuf
    scopes them; grpcurl asks for them inside it (`threadline.v1.RunStatus.RUN_STATUS_COMPLETED`), so
    both names resolve.
    """
    if file.package:
        yield file.package
    for scope, message in _messages(file.message_type, package):
        full = f"{scope}{message.name}"
        yield full
        yield from (f"{full}.{field.name}" for field in (*message.field, *message.extension))
        yield from (f"{full}.{oneof.name}" for oneof in message.oneof_decl)
    for scope, enum in _enums(file, package):
        yield f"{scope}{enum.name}"
        for value in enum.value:
            yield f"{scope}{value.name}"
            yield f"{scope}{enum.name}.{value.name}"
    yield from (f"{package}{extension.name}" for extension in file.extension)
    for service in file.service:
        yield f"{package}{service.name}"
        yield from (f"{package}{service.name}.{method.name}" for method in service.method)


def _default_pool_file(symbol: str) -> Iterator[FileProto]:
    """The default pool's file defining `symbol`, and its transitive imports (no source info)."""
    pending = [descriptor_pool.Default().FindFileContainingSymbol(symbol)]
    while pending:
        file = pending.pop()
        proto = FileProto()
        file.CopyToProto(proto)
        yield proto
        pending.extend(file.dependencies)


def _reflection_v1() -> FileProto:
    """`grpc.reflection.v1`: v1alpha's file under the v1 package, with v1's own file options."""
    proto = next(_default_pool_file(V1ALPHA))
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    proto.name = "grpc_reflection/v1/reflection.proto"
    proto.package = "grpc.reflection.v1"
    for _, message in _messages(proto.message_type, ""):
        for field in message.field:
            if field.type_name.startswith(old):
                field.type_name = new + field.type_name.removeprefix(old)
    for method in proto.service[0].method:
        method.input_type = new + method.input_type.removeprefix(old)
        method.output_type = new + method.output_type.removeprefix(old)
    proto.options.Clear()
    proto.options.java_package = "io.grpc.reflection.v1"
    proto.options.java_outer_classname = "ServerReflectionProto"
    proto.options.java_multiple_files = True
    proto.options.go_package = "google.golang.org/grpc/reflection/grpc_reflection_v1"
    return proto


def _contract_files() -> list[FileProto]:
    data = resources.files("threadline.v1").joinpath(CONTRACT_DESCRIPTORS).read_bytes()
    return list(descriptor_pb2.FileDescriptorSet.FromString(data).file)


@functools.cache
def catalogue(services: tuple[str, ...]) -> Catalogue:
    """The catalogue for a server listing `services` (its own; reflection's are added here).

    Raises:
        ValueError: A listed service is in neither the contract nor the default pool.
    """
    files = [*_contract_files(), _reflection_v1()]
    known = Catalogue(files)
    for service in (*services, V1ALPHA):
        if not known.has_service(service):
            try:
                files.extend(_default_pool_file(service))
            except KeyError:
                raise ValueError(f"no descriptor for the listed service {service}") from None
    return Catalogue(files)


def _not_found(request: reflection_pb2.ServerReflectionRequest) -> reflection_pb2.ServerReflectionResponse:
    return reflection_pb2.ServerReflectionResponse(
        original_request=request,
        error_response=reflection_pb2.ErrorResponse(
            error_code=grpc.StatusCode.NOT_FOUND.value[0], error_message="not found"
        ),
    )


def answer(
    files: Catalogue, listed: tuple[str, ...], request: reflection_pb2.ServerReflectionRequest
) -> reflection_pb2.ServerReflectionResponse:
    """The response to one reflection request (the same messages serve v1 and v1alpha)."""
    found: list[bytes] | None
    match request.WhichOneof("message_request"):
        case "file_by_filename":
            found = files.file_by_name(request.file_by_filename)
        case "file_containing_symbol":
            found = files.file_containing_symbol(request.file_containing_symbol)
        case "file_containing_extension":
            wanted = request.file_containing_extension
            found = files.file_containing_extension(wanted.containing_type, wanted.extension_number)
        case "all_extension_numbers_of_type":
            numbers = files.extension_numbers(request.all_extension_numbers_of_type)
            if numbers is None:
                return _not_found(request)
            return reflection_pb2.ServerReflectionResponse(
                original_request=request,
                all_extension_numbers_response=reflection_pb2.ExtensionNumberResponse(
                    base_type_name=request.all_extension_numbers_of_type.lstrip("."),
                    extension_number=numbers,
                ),
            )
        case "list_services":
            return reflection_pb2.ServerReflectionResponse(
                original_request=request,
                list_services_response=reflection_pb2.ListServiceResponse(
                    service=[reflection_pb2.ServiceResponse(name=name) for name in listed]
                ),
            )
        case _:
            return reflection_pb2.ServerReflectionResponse(
                original_request=request,
                error_response=reflection_pb2.ErrorResponse(
                    error_code=grpc.StatusCode.INVALID_ARGUMENT.value[0],
                    error_message="the request names no known kind of reflection request",
                ),
            )
    if found is None:
        return _not_found(request)
    return reflection_pb2.ServerReflectionResponse(
        original_request=request,
        file_descriptor_response=reflection_pb2.FileDescriptorResponse(file_descriptor_proto=found),
    )


def add_reflection(server: grpc.aio.Server, services: Iterable[str]) -> None:
    """Serve reflection v1 and v1alpha on `server`, listing `services` and reflection itself.

    Raises:
        ValueError: A listed service has no descriptor to serve.
    """
    listed = tuple(sorted({*services, *REFLECTION_SERVICES}))
    files = catalogue(listed)

    async def info(
        requests: AsyncIterable[reflection_pb2.ServerReflectionRequest],
        context: grpc.aio.ServicerContext[
            reflection_pb2.ServerReflectionRequest, reflection_pb2.ServerReflectionResponse
        ],
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        async for request in requests:
            yield answer(files, listed, request)

    handler = grpc.stream_stream_rpc_method_handler(
        info,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        tuple(
            grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler})
            for name in REFLECTION_SERVICES
        )
    )
