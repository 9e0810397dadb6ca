"""The contract as a host who only has the `.proto` files sees it: what the comments promise.

Read from `buf build` of `proto/` (the same build the generation ships to reflection), so the
checks hold for the files themselves, not for any generated copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from google.protobuf import descriptor_pb2

BUF = REPO / ".venv" / "bin" / "buf"
# Paths inside a FileDescriptorProto (descriptor.proto field numbers).
MESSAGE_TYPE, FIELD, ONEOF = 4, 2, 8
ENUM_TYPE, ENUM_VALUE = 5, 2
SERVICE, METHOD = 6, 2


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Every file of `proto/threadline/v1`, built with its source info, by name."""
    out: Path = tmp_path_factory.mktemp("contract") / "contract.binpb"
    subprocess.run(
        [str(BUF), "build", "proto", "--exclude-imports", "--as-file-descriptor-set", "-o", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=120,
    )
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return {file.name: file for file in files}


def field_comment(file: descriptor_pb2.FileDescriptorProto, message: str, field: str) -> str:
    m = [each.name for each in file.message_type].index(message)
    f = [each.name for each in file.message_type[m].field].index(field)
    path = [MESSAGE_TYPE, m, FIELD, f]
    return " ".join(
        next(loc.leading_comments for loc in file.source_code_info.location if list(loc.path) == path).split()
    )


def comment(file: descriptor_pb2.FileDescriptorProto, path: list[int]) -> str:
    """The leading comment at `path`, its lines joined by single spaces."""
    found = next(loc.leading_comments for loc in file.source_code_info.location if list(loc.path) == path)
    return " ".join(found.split())


def message_comment(file: descriptor_pb2.FileDescriptorProto, message: str) -> str:
    return comment(file, [MESSAGE_TYPE, [each.name for each in file.message_type].index(message)])


def oneof_comment(file: descriptor_pb2.FileDescriptorProto, message: str, oneof: str) -> str:
    m = [each.name for each in file.message_type].index(message)
    o = [each.name for each in file.message_type[m].oneof_decl].index(oneof)
    return comment(file, [MESSAGE_TYPE, m, ONEOF, o])


def value_comment(file: descriptor_pb2.FileDescriptorProto, enum: str, value: str) -> str:
    e = [each.name for each in file.enum_type].index(enum)
    v = [each.name for each in file.enum_type[e].value].index(value)
    return comment(file, [ENUM_TYPE, e, ENUM_VALUE, v])


def method_comment(file: descriptor_pb2.FileDescriptorProto, service: str, method: str) -> str:
    s = [each.name for each in file.service].index(service)
    return comment(file, [SERVICE, s, METHOD, [each.name for each in file.service[s].method].index(method)])


def test_run_result_gives_each_field_its_thread_run_reading(
    contract: dict[str, descriptor_pb2.FileDescriptorProto],
) -> None:
    """A ThreadService host reads `RunResult` from run.proto: each field that reads differently there
    says how (THREADS §3), instead of "always set", "send it back", "empty when none"."""
    run = contract["threadline/v1/run.proto"]
    assert "the `result` event of `StreamThreadRun` and `RunThreadResponse.result`" in message_comment(
        run, "RunResult"
    )
    for field, reading in {
        "state": "In a thread run: unset, whatever the status.",
        "request_id": "In a thread run: `ThreadRunSpec.request_id`, or the ID the server made",
        "deferred": "In a thread run the server stores it (it is the thread's `Thread.pending`)",
        "run_id": "In a thread run, a retry of a request that had already finished",
        "lineage": "Unset in a thread run.",
    }.items():
        assert reading in field_comment(run, "RunResult", field), field
    for value in ("RUN_STATUS_COMPLETED", "RUN_STATUS_SUSPENDED"):
        assert "(`state` not in a thread run" in value_comment(run, "RunStatus", value), value
    cancelled = value_comment(run, "RunStatus", "RUN_STATUS_CANCELLED")
    assert "In a thread run also a run `CancelThreadRun` stopped" in cancelled
    assert "does not cancel the run at all" in cancelled


def test_the_thread_run_stream_and_its_replay_are_described(
    contract: dict[str, descriptor_pb2.FileDescriptorProto],
) -> None:
    events, service = contract["threadline/v1/events.proto"], contract["threadline/v1/thread_service.proto"]
    event = message_comment(events, "RunEvent")
    assert "`StreamThreadRunResponse.event`" in event
    assert "only `run_started`, `thread_committed` and `result`" in event
    assert "In a thread run it follows the terminal commit's `thread_committed`" in field_comment(
        events, "RunEvent", "result"
    )
    stream = method_comment(service, "ThreadService", "StreamThreadRun")
    assert (
        "its stream is only `run_started` (sequence 0), `thread_committed` with `replayed` true (1) and"
        " the stored `result` (2)"
    ) in stream
    assert "a replay is only `run_started`, `thread_committed` and `result`" in field_comment(
        service, "StreamThreadRunResponse", "event"
    )


def test_thread_run_requests_and_rollbacks_say_what_they_accept(
    contract: dict[str, descriptor_pb2.FileDescriptorProto],
) -> None:
    service = contract["threadline/v1/thread_service.proto"]
    assert "the tool results come first and the prompt follows them" in oneof_comment(
        service, "ThreadRunSpec", "prompt"
    )
    assert "THREAD_STATUS_IDLE" in field_comment(service, "ThreadRunSpec", "answers")
    assert "an earlier one, or the head itself" in field_comment(service, "RollbackThreadRequest", "revision")
    assert "an earlier checkpoint" not in method_comment(service, "ThreadService", "RollbackThread")


def test_the_history_digests_are_both_optional_on_input(
    contract: dict[str, descriptor_pb2.FileDescriptorProto],
) -> None:
    """A host that builds a history from history.schema.json need not count or hash it."""
    state = contract["threadline/v1/state.proto"]
    count = field_comment(state, "MessageHistory", "message_count")
    digest = field_comment(state, "MessageHistory", "sha256")
    assert count.startswith("Number of messages in `data`. Optional on input, like `sha256`: 0 = not given")
    assert "when set and not matching the parsed history, the request fails with INVALID_ARGUMENT" in count
    assert "Always checked" not in count
    assert "Optional on input" in digest
    for comment in (count, digest):
        assert "HISTORY_DIGEST_MISMATCH" in comment
        assert comment.endswith("The server always fills it.")


# -- per-language file options --------------------------------------------------------------------

GO_MODULE = "github.com/threadline-dev/threadline/clients/go"
GO_PACKAGE = f"{GO_MODULE}/gen/threadline/v1;threadlinev1"
FILE_OPTIONS: dict[str, str | bool] = {
    "csharp_namespace": "Threadline.V1",
    "go_package": GO_PACKAGE,
    "java_multiple_files": True,
    "java_package": "dev.threadline.v1",
    "objc_class_prefix": "TLN",
    "php_namespace": "Threadline\\V1",
    "ruby_package": "Threadline::V1",
}
OUTER_CLASSNAMES = {
    "threadline/v1/deferred.proto": "DeferredProto",
    "threadline/v1/events.proto": "EventsProto",
    "threadline/v1/harness_service.proto": "HarnessServiceProto",
    "threadline/v1/run.proto": "RunProto",
    "threadline/v1/state.proto": "StateProto",
    "threadline/v1/thread.proto": "ThreadProto",
    "threadline/v1/thread_service.proto": "ThreadServiceProto",
}


def test_every_file_sets_the_per_language_options(
    contract: dict[str, descriptor_pb2.FileDescriptorProto],
) -> None:
    """A Java/Kotlin host gets top-level classes in `dev.threadline.v1`, and so on per language."""
    assert set(contract) == set(OUTER_CLASSNAMES)
    for name, file in contract.items():
        options = file.options
        for option, value in FILE_OPTIONS.items():
            assert options.HasField(option), f"{name} sets no {option}"
            assert getattr(options, option) == value, f"{name}: {option}"
        # Each file's own outer class, never clashing with a message: `StateProto`, not `State`.
        assert options.java_outer_classname == OUTER_CLASSNAMES[name]
        assert options.java_outer_classname not in {m.name for m in file.message_type}


def test_go_package_is_the_go_sdks_generated_package() -> None:
    assert f"module {GO_MODULE}\n" in (REPO / "clients/go/go.mod").read_text()
    import_path, package = GO_PACKAGE.split(";")
    generated = REPO / "clients/go" / import_path.removeprefix(f"{GO_MODULE}/")
    for go_file in sorted(generated.glob("*.pb.go")):
        assert f"\npackage {package}\n" in go_file.read_text(), go_file


def test_buf_gen_does_not_override_the_files_options() -> None:
    """No managed mode: the SDKs are generated exactly as a host generating from the files would."""
    assert "managed:" not in (REPO / "buf.gen.yaml").read_text()


# -- the breaking check waives the options' introduction once, and nothing else -------------------


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def check_breaking(repo: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "check_breaking.sh")],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, path
    path.write_text(text.replace(old, new))


def test_the_breaking_check_waives_only_the_options_introduction(tmp_path: Path) -> None:
    """Against a baseline without file options, setting them passes and any other break fails;
    against a baseline with them, changing one fails like every FILE rule."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "buf.yaml", repo)
    shutil.copytree(REPO / "third_party", repo / "third_party")
    shutil.copytree(REPO / "proto", repo / "proto")
    protos = sorted((repo / "proto").rglob("*.proto"))
    with_options = {p: p.read_text() for p in protos}
    for path in protos:  # the baseline: the contract before it set its file options
        path.write_text(re.sub(r"(?m)^option \w+ = .*;\n", "", with_options[path]))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "baseline without file options")
    for path in protos:
        path.write_text(with_options[path])
    git(repo, "commit", "-q", "-am", "set the file options")

    done = check_breaking(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waiving FILE_SAME_* of the file options HEAD~1 predates" in done.stdout

    state = repo / "proto/threadline/v1/state.proto"
    edit(state, "  bytes sha256 = 5;\n", "")
    done = check_breaking(repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "(FIELD_NO_DELETE)" in done.stdout
    assert "(FILE_SAME_" not in done.stdout

    state.write_text(with_options[state])
    git(repo, "commit", "-q", "--allow-empty", "-m", "a later commit: the baseline now sets the options")
    edit(state, 'option java_package = "dev.threadline.v1";', 'option java_package = "com.example.v1";')
    done = check_breaking(repo)
    assert done.returncode != 0
    assert "waiving" not in done.stdout
    assert 'File option "java_package" changed from "dev.threadline.v1" to "com.example.v1"' in done.stdout
