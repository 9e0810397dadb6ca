"""Server reflection serves every listed service, every symbol, and the contract's comments.

Generic clients only work if each listed service resolves: grpcurl `describe`, `buf curl
--list-methods` (v1, then v1alpha), and a host that builds its stubs from reflection alone
(grpcio-reflection's `ProtoReflectionDescriptorDatabase`). The comments come from the descriptor
set scripts/generate.sh builds from `proto/`; protoc's Python descriptors carry none.
"""

from __future__ import annotations

import asyncio
import subprocess

import grpc
import pytest
from conftest import REPO, RunningServer
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.rpc import status_pb2
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from setup_tools import setup_tool
from threadline.v1 import thread_service_pb2, thread_service_pb2_grpc

from server.reflection import Catalogue, _contract_files, catalogue

pytestmark = pytest.mark.anyio

LISTED = {
    "threadline.v1.HarnessService",
    "threadline.v1.ThreadService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
}
STREAM_RUN_COMMENT = "Runs the agent and streams its events: `run_started` first"
"""The start of `StreamRun`'s comment in proto/threadline/v1/harness_service.proto."""


def grpcurl(server: RunningServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(setup_tool("grpcurl")), "-plaintext", server.address, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_comment_is_the_contracts() -> None:
    assert f"// {STREAM_RUN_COMMENT}" in (REPO / "proto/threadline/v1/harness_service.proto").read_text()


def test_grpcurl_describes_a_method_with_its_comment(server: RunningServer) -> None:
    done = grpcurl(server, "describe", "threadline.v1.HarnessService.StreamRun")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("threadline.v1.HarnessService.StreamRun is a method:\n")
    assert f"// {STREAM_RUN_COMMENT}" in done.stdout
    assert "rpc StreamRun ( .threadline.v1.StreamRunRequest ) returns ( stream" in done.stdout


def test_grpcurl_describes_every_listed_service(server: RunningServer) -> None:
    listed = grpcurl(server, "list")
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) == LISTED
    for service in sorted(LISTED):
        done = grpcurl(server, "describe", service)
        assert done.returncode == 0, f"{service}: {done.stderr}"
        assert done.stdout.startswith(f"{service} is a service:\n"), done.stdout


@pytest.mark.parametrize(
    ("symbol", "shown"),
    [
        ("threadline.v1.RunSpec", "message RunSpec {"),
        ("threadline.v1.RunSpec.previous_state", "// The checkpoint to continue"),
        ("threadline.v1.RunStatus", "enum RunStatus {"),
        ("threadline.v1.RunStatus.RUN_STATUS_COMPLETED", "RUN_STATUS_COMPLETED = "),
        ("grpc.reflection.v1.ServerReflectionRequest", "message ServerReflectionRequest {"),
    ],
)
def test_grpcurl_describes_messages_fields_and_enums(server: RunningServer, symbol: str, shown: str) -> None:
    done = grpcurl(server, "describe", symbol)
    assert done.returncode == 0, done.stderr
    assert shown in done.stdout


def test_buf_curl_lists_every_method_over_both_reflection_versions(server: RunningServer) -> None:
    for protocol in ("grpc-v1", "grpc-v1alpha"):
        done = subprocess.run(
            [
                str(REPO / ".venv/bin/buf"),
                "curl",
                "--protocol",
                "grpc",
                "--http2-prior-knowledge",
                "--reflect-protocol",
                protocol,
                "--list-methods",
                f"http://{server.address}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{protocol}: {done.stderr}"
        methods = set(done.stdout.split())
        assert {
            "threadline.v1.HarnessService/StreamRun",
            "threadline.v1.HarnessService/GetServerInfo",
            "grpc.health.v1.Health/Check",
            "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        } <= methods, protocol


def build_every_method(address: str) -> dict[str, tuple[str, str]]:
    """What a host with nothing but reflection builds: each method's request and response classes."""
    built: dict[str, tuple[str, str]] = {}
    with grpc.insecure_channel(address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        pool = descriptor_pool.DescriptorPool(database)
        for name in database.get_services():
            for method in pool.FindServiceByName(name).methods:
                request = message_factory.GetMessageClass(method.input_type)
                response = message_factory.GetMessageClass(method.output_type)
                built[method.full_name] = (request.DESCRIPTOR.full_name, response.DESCRIPTOR.full_name)
    return built


async def test_a_reflection_only_client_builds_every_method(server: RunningServer) -> None:
    built = await asyncio.to_thread(build_every_method, server.address)
    assert built["threadline.v1.HarnessService.StreamRun"] == (
        "threadline.v1.StreamRunRequest",
        "threadline.v1.StreamRunResponse",
    )
    assert built["grpc.reflection.v1.ServerReflection.ServerReflectionInfo"] == (
        "grpc.reflection.v1.ServerReflectionRequest",
        "grpc.reflection.v1.ServerReflectionResponse",
    )
    assert {name.rsplit(".", 1)[0] for name in built} == LISTED
    assert len(built) == 7 + 14 + 3 + 1 + 1  # HarnessService, ThreadService, Health, both reflection services


async def reflect(
    server: RunningServer, service: str, requests: list[reflection_pb2.ServerReflectionRequest]
) -> list[reflection_pb2.ServerReflectionResponse]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = channel.stream_stream(
            f"/{service}/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        return [response async for response in call(iter(requests))]


def leading_comment(file: descriptor_pb2.FileDescriptorProto, path: list[int]) -> str:
    return next(loc.leading_comments for loc in file.source_code_info.location if list(loc.path) == path)


@pytest.mark.parametrize(
    "service", ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]
)
async def test_both_versions_serve_the_method_with_its_comment_and_imports(
    server: RunningServer, service: str
) -> None:
    request = reflection_pb2.ServerReflectionRequest(
        file_containing_symbol="threadline.v1.HarnessService.StreamRun"
    )
    (response,) = await reflect(server, service, [request])
    assert response.original_request == request
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(data)
        for data in response.file_descriptor_response.file_descriptor_proto
    ]
    assert files[0].name == "threadline/v1/harness_service.proto"
    assert {f.name for f in files} == {
        "threadline/v1/harness_service.proto",
        "threadline/v1/events.proto",
        "threadline/v1/run.proto",
        "threadline/v1/state.proto",
        "threadline/v1/deferred.proto",
        "threadline/v1/thread.proto",
        "google/protobuf/timestamp.proto",
        "google/protobuf/duration.proto",
        "google/rpc/error_details.proto",  # the details of its error statuses
    }
    methods = [m.name for m in files[0].service[0].method]
    # FileDescriptorProto.service = 6, ServiceDescriptorProto.method = 2
    comment = leading_comment(files[0], [6, 0, 2, methods.index("StreamRun")])
    assert comment.startswith(f" {STREAM_RUN_COMMENT}")


async def test_unknown_names_and_requests_get_error_responses(server: RunningServer) -> None:
    requests = [
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="threadline.v1.NoSuchMessage"),
        reflection_pb2.ServerReflectionRequest(file_by_filename="threadline/v1/missing.proto"),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="threadline.v1.NoSuchMessage"),
        reflection_pb2.ServerReflectionRequest(),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="threadline.v1.RunSpec"),
        reflection_pb2.ServerReflectionRequest(file_by_filename="threadline/v1/state.proto"),
    ]
    responses = await reflect(server, "grpc.reflection.v1.ServerReflection", requests)
    codes = [r.error_response.error_code if r.HasField("error_response") else None for r in responses]
    not_found, invalid = grpc.StatusCode.NOT_FOUND.value[0], grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert codes == [not_found, not_found, not_found, invalid, None, None]
    assert responses[4].all_extension_numbers_response.base_type_name == "threadline.v1.RunSpec"
    assert list(responses[4].all_extension_numbers_response.extension_number) == []
    state = descriptor_pb2.FileDescriptorProto.FromString(
        responses[5].file_descriptor_response.file_descriptor_proto[0]
    )
    assert state.name == "threadline/v1/state.proto"


def reflected_closure(address: str, service: str) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """What grpcui builds a service's methods from: the file defining `service` and the files it
    imports, transitively, asked for by name over reflection v1 when a response did not bring them.

    Only files reached through `dependency` are kept, whatever else a response carries: a type that
    none of them defines is one such a client cannot decode (it shows the bytes in base64).
    """
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )

        def ask(request: reflection_pb2.ServerReflectionRequest) -> list[descriptor_pb2.FileDescriptorProto]:
            (response,) = call(iter([request]))
            return [
                descriptor_pb2.FileDescriptorProto.FromString(data)
                for data in response.file_descriptor_response.file_descriptor_proto
            ]

        first = ask(reflection_pb2.ServerReflectionRequest(file_containing_symbol=service))
        received = {file.name: file for file in first}
        closure: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        pending = [first[0].name]
        while pending:
            name = pending.pop()
            if name in closure:
                continue
            if name not in received:
                received.update(
                    (file.name, file)
                    for file in ask(reflection_pb2.ServerReflectionRequest(file_by_filename=name))
                )
            closure[name] = received[name]
            pending.extend(closure[name].dependency)
    return closure


def pool_of(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> descriptor_pool.DescriptorPool:
    """A fresh pool holding exactly `files`, each added after its imports."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name not in added:
            added.add(name)
            for dependency in files[name].dependency:
                add(dependency)
            pool.Add(files[name])

    for name in files:
        add(name)
    return pool


@pytest.mark.parametrize(
    ("service", "file"),
    [
        ("threadline.v1.HarnessService", "threadline/v1/harness_service.proto"),
        ("threadline.v1.ThreadService", "threadline/v1/thread_service.proto"),
    ],
)
async def test_each_services_own_files_define_its_error_details(
    server: RunningServer, service: str, file: str
) -> None:
    """grpcui resolves `grpc-status-details-bin` from the files of the method it called, not by asking."""
    closure = await asyncio.to_thread(reflected_closure, server.address, service)
    assert "google/rpc/error_details.proto" in closure[file].dependency
    pool = pool_of(closure)
    for detail in ("google.rpc.ErrorInfo", "google.rpc.BadRequest"):
        assert pool.FindMessageTypeByName(detail).file.name == "google/rpc/error_details.proto"


async def test_a_thread_error_decodes_with_the_services_files_alone(server: RunningServer) -> None:
    """The details of a ThreadService error as a reflection-only client renders them: typed, not base64."""
    pool = pool_of(await asyncio.to_thread(reflected_closure, server.address, "threadline.v1.ThreadService"))
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = thread_service_pb2_grpc.ThreadServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.GetThread(thread_service_pb2.GetThreadRequest(thread_id=""))
    trailer = dict(raised.value.trailing_metadata() or ())["grpc-status-details-bin"]
    assert isinstance(trailer, bytes)
    shown = json_format.MessageToDict(status_pb2.Status.FromString(trailer), descriptor_pool=pool)
    assert shown["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "INPUT_INVALID",
            "domain": "threadline",
            "metadata": {"field": "thread_id"},
        },
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [
                {"field": "thread_id", "description": "thread_id is required.", "reason": "INPUT_INVALID"}
            ],
        },
    ]


def test_every_symbol_kind_resolves_to_its_file() -> None:
    files = catalogue(tuple(sorted(LISTED)))
    for symbol, file in [
        ("threadline.v1", "threadline/v1/state.proto"),  # a package: any of its files
        ("threadline.v1.HarnessState", "threadline/v1/state.proto"),
        ("threadline.v1.HarnessState.schema_version", "threadline/v1/state.proto"),
        ("threadline.v1.RunSpec.prompt", "threadline/v1/run.proto"),  # a oneof
        ("threadline.v1.RUN_STATUS_COMPLETED", "threadline/v1/run.proto"),  # protobuf's scope
        ("threadline.v1.HarnessService.Run", "threadline/v1/harness_service.proto"),
        (".threadline.v1.RunEvent", "threadline/v1/events.proto"),  # a leading dot, as in type names
        ("google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
        ("google.rpc.ErrorInfo", "google/rpc/error_details.proto"),  # in every error status
        ("grpc.health.v1.Health.Watch", "grpc_health/v1/health.proto"),
        ("grpc.reflection.v1.ServerReflection", "grpc_reflection/v1/reflection.proto"),
    ]:
        found = files.file_containing_symbol(symbol)
        assert found is not None, symbol
        name = descriptor_pb2.FileDescriptorProto.FromString(found[0]).name
        assert name == file or (symbol == "threadline.v1" and name.startswith("threadline/v1/")), symbol


def test_a_listed_service_without_a_descriptor_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no descriptor for the listed service acme\.v1\.Missing"):
        catalogue(("acme.v1.Missing",))


def test_a_missing_import_is_refused() -> None:
    (state,) = [f for f in _contract_files() if f.name == "threadline/v1/run.proto"]
    with pytest.raises(ValueError, match=r"run\.proto imports .*which reflection does not have"):
        Catalogue([state])


def test_the_descriptor_set_describes_the_generated_code() -> None:
    """descriptors.binpb and the `_pb2` modules come from the same `proto/` (both are generated)."""
    import threadline.v1.harness_service_pb2  # registers the contract's files
    import threadline.v1.thread_service_pb2  # noqa: F401

    contract = _contract_files()
    assert {f.name for f in contract} >= {
        "threadline/v1/harness_service.proto",
        "threadline/v1/events.proto",
        "threadline/v1/run.proto",
        "threadline/v1/state.proto",
        "threadline/v1/deferred.proto",
    }
    for file in contract:
        assert file.HasField("source_code_info"), file.name
        if not file.name.startswith("threadline/"):
            continue  # imports and third_party/google/rpc: not generated for Python by us
        generated = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(file.name).CopyToProto(generated)
        served = descriptor_pb2.FileDescriptorProto()
        served.CopyFrom(file)
        served.ClearField("source_code_info")
        assert served == generated, file.name  # file options included: no managed mode overrides them
