"""Every reason the server can send has one status and is listed in the catalogue, docs/errors.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import grpc

from harness import ErrorCode
from harness.errors import ErrorFamily, FailureCode
from server.errors import ServerReason
from server.mapping.errors import STATUS_BY_CODE, STATUS_BY_REASON, reason_text, status_code_for

REPO = Path(__file__).resolve().parent.parent
CATALOGUE = REPO / "docs" / "errors.md"


def catalogue() -> dict[str, str]:
    section = CATALOGUE.read_text(encoding="utf-8")
    listed: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in grpc.StatusCode.__members__:
            for reason in re.findall(r"`([A-Z_]+)`", cells[0]):
                listed[reason] = cells[1]
    return listed


def test_the_table_is_keyed_by_every_enum_member_exactly() -> None:
    assert set(STATUS_BY_CODE) == set(ErrorCode) | set(ServerReason)
    assert all(isinstance(key, (ErrorCode, ServerReason)) for key in STATUS_BY_CODE)


def test_reasons_are_derived_from_the_enums() -> None:
    for code in ErrorCode:
        assert reason_text(code) == code.value.upper()
        assert STATUS_BY_REASON[code.value.upper()] is STATUS_BY_CODE[code]
    for reason in ServerReason:
        assert reason_text(reason) == reason.value == reason.value.upper()
        assert STATUS_BY_REASON[reason.value] is STATUS_BY_CODE[reason]
    assert len(STATUS_BY_REASON) == len(STATUS_BY_CODE), "two keys share a reason"


def test_every_core_code_and_server_reason_has_a_status() -> None:
    reasons = {code.value.upper() for code in ErrorCode} | {str(reason) for reason in ServerReason}
    assert reasons == set(STATUS_BY_REASON)


def test_every_reason_is_in_the_catalogue_with_its_status() -> None:
    listed = catalogue()
    for reason, code in STATUS_BY_REASON.items():
        assert listed.get(reason) == code.name, reason
        assert status_code_for(reason) is code
    assert set(listed) == set(STATUS_BY_REASON)


def test_server_reasons_are_marked() -> None:
    section = CATALOGUE.read_text(encoding="utf-8")
    for reason in ServerReason:
        assert f"`{reason}` (server)" in section


def test_unknown_reason_is_internal() -> None:
    assert status_code_for("NOT_A_REASON") is grpc.StatusCode.INTERNAL


def test_a_code_without_a_status_stops_the_import_even_under_python_O() -> None:
    # A new ErrorCode member that nobody gave a row: the module must refuse to load, with `-O` too
    # (an `assert` would vanish there). The enum is extended in a child interpreter only.
    script = (
        "import harness.errors as e, enum\n"
        "members = {m.name: m.value for m in e.ErrorCode} | {'BRAND_NEW': 'brand_new'}\n"
        "e.ErrorCode = enum.StrEnum('ErrorCode', members)\n"
        "try:\n"
        "    import server.mapping.errors\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    print('imported')\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert "no gRPC status for" in result.stdout and "BRAND_NEW" in result.stdout, (
        result.stdout + result.stderr
    )


def test_every_code_has_its_family() -> None:
    families = set(get_args(ErrorFamily))
    assert {code.family for code in ErrorCode} == families - {"failure"}  # none left out (a KeyError)
    assert {code.family for code in FailureCode} == {"failure"}
    deferred = {code for code in ErrorCode if code.family == "deferred"}
    assert ErrorCode.DEFERRED_STATE_INVALID in deferred and ErrorCode.DEFERRED_SURFACE_MISMATCH in deferred
    assert ErrorCode.THREAD_BUSY.family == "thread" and ErrorCode.CHILD_RESULT_MISSING.family == "child"
