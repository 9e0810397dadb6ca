"""The contract as a host who only has the `.proto` files sees it: what the comments promise.

Read from `buf build` of `proto/` (the same build the generation ships to reflection), so the
checks hold for the files themselves, not for any generated copy.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from google.protobuf import descriptor_pb2

BUF = REPO / ".venv" / "bin" / "buf"
# Paths inside a FileDescriptorProto (descriptor.proto field numbers).
MESSAGE_TYPE, FIELD = 4, 2


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
