"""Every reason the server can send has one status and is listed in the README's catalogue."""

from __future__ import annotations

import re
from pathlib import Path

import grpc

from harness import ErrorCode
from server.errors import ServerReason
from server.mapping.errors import STATUS_BY_REASON, status_code_for

README = Path(__file__).resolve().parent.parent / "README.md"


def catalogue() -> dict[str, str]:
    section = (
        README.read_text(encoding="utf-8").split("## Errors: the reason catalogue", 1)[1].split("\n## ", 1)[0]
    )
    listed: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in grpc.StatusCode.__members__:
            for reason in re.findall(r"`([A-Z_]+)`", cells[0]):
                listed[reason] = cells[1]
    return listed


def test_every_core_code_and_server_reason_has_a_status() -> None:
    reasons = {code.value.upper() for code in ErrorCode} | {str(reason) for reason in ServerReason}
    assert reasons == {str(reason) for reason in STATUS_BY_REASON}


def test_every_reason_is_in_the_readme_catalogue_with_its_status() -> None:
    listed = catalogue()
    for reason, code in STATUS_BY_REASON.items():
        assert listed.get(str(reason)) == code.name, reason
        assert status_code_for(str(reason)) is code
    assert set(listed) == {str(reason) for reason in STATUS_BY_REASON}


def test_server_reasons_are_marked() -> None:
    section = README.read_text(encoding="utf-8")
    for reason in ServerReason:
        assert f"`{reason}` (server)" in section


def test_unknown_reason_is_internal() -> None:
    assert status_code_for("NOT_A_REASON") is grpc.StatusCode.INTERNAL
