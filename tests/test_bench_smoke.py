"""The benchmark at tiny sizes, through its own entry point: every section runs and the JSON has its shape.

Only the shape is checked, never a timing (DESIGN "Benchmarks"); the smoke run writes to a temporary
directory, never over `bench/results/latest.json`.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import LATEST, TARGETS, main
from bench.stream_rate import PACKED_REPEAT

REPO = Path(__file__).resolve().parent.parent
H_TARGETS = {name for name, (_c, _t, what) in TARGETS.items() if what.startswith("(h)")}
I_TARGETS = {name for name, (_c, _t, what) in TARGETS.items() if what.startswith("(i)")}
J_TARGETS = {name for name, (_c, _t, what) in TARGETS.items() if what.startswith("(j)")}
K_TARGETS = {name for name, (_c, _t, what) in TARGETS.items() if what.startswith("(k)")}
L_TARGETS = {name for name, (_c, _t, what) in TARGETS.items() if what.startswith("(l)")}


def test_smoke_run_writes_every_section_and_ratio(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    before = LATEST.stat().st_mtime_ns if LATEST.exists() else None
    finished = subprocess.run(
        # (h) and (i), with their PostgreSQL clusters, run in the tests below.
        [sys.executable, "-m", "bench", "--smoke", "--sections", "abcdefg", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    for name in ("stream_run_over_in_process", "stream_run_over_limit", "idle_stream_memory_over_limit"):
        assert name in finished.stdout  # the printed table

    report = json.loads(out.read_text())
    assert report["smoke"] is True
    assert report["server"]["max_concurrent_runs"] > 1000
    assert set(report["sections"]) == {
        "a_runs",
        "b_stream",
        "c_envelope",
        "d_thread",
        "e_idle_memory",
        "e_concurrency",
        "f_checkpoints",
        "g_threads",
    }
    ratios = report["ratios"]
    assert "stream_run_over_in_process" in ratios
    assert set(TARGETS) - H_TARGETS - I_TARGETS - J_TARGETS - K_TARGETS - L_TARGETS <= set(ratios)
    assert all(isinstance(v, int | float) and math.isfinite(v) for v in ratios.values())
    for name, target in report["targets"].items():
        assert target["value"] == ratios[name]
        assert target["comparison"] in ("<=", ">=")
        assert isinstance(target["met"], bool)
    # (b) and (e) are also measured against the sum of what their parts cost on their own.
    for name, threshold in (("stream_run_over_limit", 1.1), ("idle_stream_memory_over_limit", 1.0)):
        target = report["targets"][name]
        assert (target["comparison"], target["threshold"]) == ("<=", threshold)
    assert {"cpu", "cores", "python", "pydantic_ai", "grpcio"} <= set(report["machine"])

    runs = report["sections"]["a_runs"]
    assert set(runs["cost"]) == {
        "pydantic_ai",
        "in_process",
        "grpc_run",
        "grpc_stream_run",
        "grpc_stream_run_single",
        "grpc_run_observed",
        "grpc_stream_run_observed",
    }
    assert runs["spans_exported"] > 0  # the observed server's traces reached the sink
    assert {"run_observed_over_run", "stream_run_observed_over_stream_run"} <= set(runs["ratios"])
    # The server streams exactly the harness's items, one message each.
    assert runs["events_per_run"]["grpc_stream_run"] == runs["events_per_run"]["in_process"]
    assert runs["events_per_run"]["grpc_stream_run_single"] == runs["events_per_run"]["in_process"]
    assert runs["messages_per_run"]["grpc_stream_run"] <= runs["events_per_run"]["grpc_stream_run"]
    levels = report["sections"]["e_concurrency"]["levels"]
    assert [level["completed"] for level in levels] == [level["concurrent_runs"] for level in levels]
    idle = report["sections"]["e_idle_memory"]
    assert idle["open_streams"] == report["sizes"]["idle_streams"]
    assert idle["bare_grpc"]["open_streams"] == report["sizes"]["idle_streams"]
    checkpoints = report["sections"]["f_checkpoints"]
    for form in ("full", "delta"):
        assert all(
            row["checkpoint_candidate_count"] > 0 for row in checkpoints["forms"][form]["across_turns"]
        )
    stream = report["sections"]["b_stream"]
    assert stream["text_deltas_per_variant"] > 0
    events, messages = stream["events_per_variant"], stream["messages_per_variant"]
    assert messages["bare_grpc"] == events["bare_grpc"]  # one event per message
    # The packed bare stream: the same events, repeated, sharing messages at StreamRun's packing.
    assert events["bare_grpc_packed"] == PACKED_REPEAT * events["bare_grpc"]
    assert messages["bare_grpc_packed"] <= events["bare_grpc_packed"]
    assert set(stream["in_process_cpu_us_per_delta"]) == {"pydantic_ai", "in_process"}
    assert "idle_stream_memory_over_limit" in idle["ratios"]

    after = LATEST.stat().st_mtime_ns if LATEST.exists() else None
    assert after == before

    # Two results side by side (`bench.compare`): one row per ratio, one column per file.
    compared = subprocess.run(
        [sys.executable, "-m", "bench.compare", str(out), str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in compared.stdout.splitlines()[2:] if line.strip()}
    assert set(ratios) <= set(rows)
    assert rows["stream_run_over_limit"][:2] == [f"{ratios['stream_run_over_limit']:.3f}"] * 2


def smoke_run(tmp_path: Path, sections: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`python -m bench --smoke --sections SECTIONS` into `tmp_path`: the process (it succeeded) and its report."""
    out = tmp_path / f"smoke-{sections}.json"
    finished = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--sections", sections, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished, json.loads(out.read_text())


def test_smoke_run_of_the_thread_sections(tmp_path: Path) -> None:
    _, report = smoke_run(tmp_path, "gh")
    assert set(report["sections"]) == {"g_threads", "h_thread_store"}
    assert set(report["ratios"]) >= H_TARGETS
    sizes = report["sizes"]

    threads = report["sections"]["g_threads"]
    levels = threads["levels"]
    assert [level["level"] for level in levels] == sizes["thread_levels"]
    # The long thread reached each level and ran one turn per round there, three at the last (on the
    # first server with its head cached, on the second server, and back on the first).
    for level in levels:
        per_round = 3 if level is levels[-1] else 1
        assert level["long_thread_turns"] == [
            level["level"],
            level["level"] + per_round * sizes["thread_rounds"] - 1,
        ]
        assert level["history_messages"] > 0
    assert threads["long_thread_turns"] == levels[-1]["long_thread_turns"][1]
    top = sizes["thread_levels"][-1]
    assert {"thread_turn_1", f"thread_turn_{top}", f"harness_turn_{top}", f"thread_turn_{top}_miss"} <= set(
        levels[-1]["cost"]
    )
    assert report["targets"]["thread_turn_last_over_turn_1"]["threshold"] == 1.3

    store = report["sections"]["h_thread_store"]
    rows = store["levels"]
    assert [row["threads_at_once"] for row in rows] == sizes["store_levels"]
    for row in rows:
        assert row["turns"] == sizes["store_threads"] * sizes["store_turns"]
        assert row["commits"] >= 2 * row["turns"]  # a turn commits mid-run checkpoints and its result
        assert row["commits_per_s"] > 0
        assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p99"] <= row["latency_ms"]["max"]
    written = store["bytes"]
    assert len(written["per_turn"]) == sizes["store_bytes_turns"]
    for turn in written["per_turn"]:
        assert turn["bytes_written"] > 0 and turn["json_bytes_added"] > 0
    # Written bytes are read back from the SQLite file: the store keeps deltas, so the whole state
    # is never written again per turn.
    assert written["bytes_written"] < written["json_bytes_at_end"] * sizes["store_bytes_turns"]
    assert store["long_thread_bytes"]["thread_id"] == threads["long_thread"]
    assert report["targets"]["sqlite_bytes_over_added_worst_turn"]["threshold"] == 2.0

    # PostgreSQL: the same levels on one replica, the top level spread over two.
    postgresql = store["postgresql"]
    assert [row["threads_at_once"] for row in postgresql["levels"]] == sizes["store_levels"]
    spread = postgresql["replicas"]
    assert (spread["replicas"], spread["threads_at_once"]) == (2, sizes["store_levels"][-1])
    for row in [*postgresql["levels"], spread]:
        assert row["turns"] == sizes["store_threads"] * sizes["store_turns"]
        assert row["commits"] >= 2 * row["turns"]
        assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p99"] <= row["latency_ms"]["max"]
    top = sizes["store_levels"][-1]
    for name in (
        f"postgresql_over_sqlite_commits_per_s_{top}",
        f"postgresql_2_replicas_over_1_commits_per_s_{top}",
    ):
        assert report["ratios"][name] > 0
    # The store's cost per turn: a real turn's calls replayed, against bare transactions of its rows.
    for kind in ("sqlite", "postgresql"):
        cost = store["cost_per_turn"][kind]
        assert cost["turns"] == sizes["store_cost_turns"]
        assert cost["store_calls_per_turn"]["begin"] == 1
        assert cost["store_calls_per_turn"]["commit"] == cost["checkpoints_per_turn"] >= 2
        assert cost["blob_bytes_per_turn"] > 0
        assert cost["bare_wrote_the_same_rows"] is True
        assert cost["store_ms_per_turn"] > 0 and cost["bare_ms_per_turn"] > 0
        assert report["targets"][f"{kind}_store_over_bare_per_turn"]["threshold"] == 1.5


def test_smoke_run_of_the_live_runs_section(tmp_path: Path) -> None:
    finished, report = smoke_run(tmp_path, "i")
    assert set(report["sections"]) == {"i_live"}
    assert set(report["ratios"]) >= I_TARGETS
    assert len(I_TARGETS) == 6  # CPU, commits/s and bytes, log on / off, on each store
    for name in I_TARGETS:
        assert name in finished.stdout  # the printed table
    assert all(isinstance(v, int | float) and math.isfinite(v) for v in report["ratios"].values())
    sizes = report["sizes"]
    live = report["sections"]["i_live"]
    for kind in ("sqlite", "postgresql"):
        store = live[kind]
        for name in ("same", "other"):
            for q in ("p50", "p99"):
                for measure in ("replay_first_event", "live_first_event", "live_lag"):
                    assert f"{kind}_{measure}_{q}_ms_{name}" in report["ratios"]
        # A finished run replayed to every join, on the holder's replica and the other one, whole.
        replay = store["replay"]
        assert replay["events"] > sizes["live_replay_events"]
        assert replay["events_per_join"] == [replay["events"]]
        for name in ("same", "other"):
            assert replay["first_event"][name]["n"] == sizes["live_replay_joins"]
        # Live: both joins followed each paced turn to its end, with every event the first caller got.
        followed = store["live"]
        assert followed["turns"] == sizes["live_rounds"]
        assert followed["events_per_turn"] > sizes["live_deltas"]
        for name in ("same", "other"):
            assert followed["joined_events"][name] == followed["events_per_turn"] * sizes["live_rounds"]
            assert followed["lag"][name]["n"] > 0
        cpu, lone = store["cpu_per_turn"], store["cpu_per_lone_turn"]
        assert set(cpu["cost"]) == set(lone["cost"]) == {"log_on", "log_off"}
        assert cpu["events_per_turn"] == lone["events_per_turn"] == followed["events_per_turn"]
        assert lone["turns_at_once"] == 1 and f"{kind}_log_on_over_off_cpu_per_lone_turn" in report["ratios"]
        written = store["log_bytes"]
        assert written["turns"] == sizes["live_cpu_rounds"] * sizes["live_cpu_turns"]
        assert written["log_bytes_per_turn"] > 0 and written["streamed_bytes_per_turn"] > 0
        # (h)'s level beside paced runs, log on and off: every paced run streamed, every turn completed.
        beside = store["beside_paced_runs"]
        assert len(beside["rounds"]) == sizes["live_side_rounds"]
        for mode in ("log_on", "log_off"):
            alone = beside["paced_runs_alone"][mode]
            assert alone["paced_runs_streaming"] == sizes["live_side_runs"]
            assert alone["server_cpu_s_per_s"] > 0
        for row in beside["rounds"]:
            for mode in ("log_on", "log_off"):
                level = row[mode]
                assert level["turns"] == sizes["store_threads"] * sizes["store_turns"]
                assert level["commits"] >= 2 * level["turns"]
                assert level["paced_runs_streaming"] == sizes["live_side_runs"]
                assert set(level["paced_outcomes"]) == {"RUN_STATUS_COMPLETED"}
        watchers = store["idle_watchers"]
        assert watchers["open_watchers"] == sizes["live_watchers"]
        assert watchers["outcomes_after_cancel"] == {"cancelled_by_client": sizes["live_watchers"]}
        assert f"{kind}_kib_per_idle_watcher" in report["ratios"]
    for name in I_TARGETS:
        target = report["targets"][name]
        assert target["value"] == report["ratios"][name]
    assert (
        report["targets"]["sqlite_log_on_over_off_cpu_per_turn"]["threshold"] == 1.05
    )  # issue 28: the event log costs at most 5 % of a turn
    assert report["targets"]["postgresql_log_on_over_off_commits_per_s"]["comparison"] == ">="


def test_smoke_run_of_the_busy_strategies_section(tmp_path: Path) -> None:
    finished, report = smoke_run(tmp_path, "j")
    assert set(report["sections"]) == {"j_queue"}
    sizes = report["sizes"]
    for kind in ("sqlite", "postgresql"):
        store = report["sections"]["j_queue"][kind]
        assert store["accept"]["one_thread"]["ms"]["samples"] == sizes["queue_accepts"]
        busy = store["accept"]["busy_threads"]
        assert busy["threads"] == sizes["queue_busy_threads"]
        assert busy["ms"]["samples"] == sizes["queue_busy_threads"] * sizes["queue_accepts_each"]
        assert store["drain"]["requests"] == sizes["queue_length"]
        assert len(store["drain"]["rounds"]) == sizes["queue_drain_rounds"]
        same = store["hand_off_ms"]["same_replica"]["samples"]
        assert same == sizes["queue_drain_rounds"] * (sizes["queue_length"] - 1)
        assert store["hand_off_ms"]["across_replicas"]["samples"] == sizes["queue_across"]
        name = f"{kind}_queue_drain_over_one_by_one"
        assert name in J_TARGETS and report["targets"][name]["threshold"] == 0.9 and name in finished.stdout
        for where in ("same", "across"):
            assert report["ratios"][f"{kind}_hand_off_p99_ms_{where}"] >= 0
    assert all(isinstance(v, int | float) and math.isfinite(v) for v in report["ratios"].values())


def test_smoke_run_of_the_dispatch_intents_section(tmp_path: Path) -> None:
    _, report = smoke_run(tmp_path, "k")
    assert set(report["sections"]) == {"k_intents"}
    section = report["sections"]["k_intents"]
    for turn in ("turn_1_call", "turn_4_calls", "resume_turn"):
        # Counted from each server's own metric: a turn commits something on both.
        assert section[f"{turn}_transactions_on"] > 0 and section[f"{turn}_transactions_off"] > 0
        name = f"intents_{turn}_extra_transactions"
        assert name in K_TARGETS and report["targets"][name]["threshold"] == (
            1.0 if turn == "resume_turn" else 0.0
        )
    for turn in ("turn_1_call", "turn_4_calls"):
        assert report["targets"][f"intents_{turn}_cpu_on_over_off"]["threshold"] == 1.10
    assert section["result_to_commit_ms_on"] > 0
    assert all(isinstance(v, int | float) and math.isfinite(v) for v in report["ratios"].values())


def test_smoke_run_of_the_http_section(tmp_path: Path) -> None:
    finished, report = smoke_run(tmp_path, "l")
    assert set(report["sections"]) == {"l_http"}
    section = report["sections"]["l_http"]
    assert set(section["cost"]) == {
        "grpc_run",
        "connect_run",
        "connect_json_run",
        "grpc_stream_run",
        "connect_stream_run",
        "grpc_web_stream_run",
    }
    for name in ("connect_run_over_grpc_run", "connect_stream_over_grpc_stream"):
        assert name in L_TARGETS and report["targets"][name]["threshold"] == 1.3 and name in finished.stdout
    assert all(isinstance(v, int | float) and math.isfinite(v) for v in report["ratios"].values())


def test_smoke_run_refuses_to_overwrite_the_committed_results() -> None:
    with pytest.raises(SystemExit):
        main(["--smoke"])


@pytest.mark.parametrize(("workload", "suffix"), [("stream_run", ".json"), ("in_process", ".txt")])
def test_profile_writes_a_profile_of_a_workload(tmp_path: Path, workload: str, suffix: str) -> None:
    out = tmp_path / f"profile{suffix}"
    finished = subprocess.run(
        [sys.executable, "-m", "bench.profile", workload, "--seconds", "1", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    if suffix == ".json":  # py-spy's speedscope file: samples of the server's own frames
        profile = json.loads(out.read_text())
        frames = {
            (frame["name"], Path(frame.get("file") or "").name) for frame in profile["shared"]["frames"]
        }
        assert sum(len(p["samples"]) for p in profile["profiles"]) > 0
        assert ("_produce", "pump.py") in frames  # the server's stream pump, producing the run's events
    else:  # pyinstrument's text report of the harness in this process
        assert "_events" in out.read_text()


def test_store_phases_account_for_a_replayed_turn() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "bench.store_phases", "--turns", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads(finished.stdout)
    phases = report["per_turn"]
    store_calls = sum(report["store_calls_per_turn"].values())
    # Every store call of a turn hops to a store thread and back, and its transaction commits there.
    for phase in ("store: hop to a store thread", "store: in a store thread", "store: hop back to the loop"):
        assert phases[phase]["calls"] == store_calls
    assert phases["store: COMMIT"]["calls"] == phases["store: BEGIN"]["calls"] == store_calls
    # The bare side: one BEGIN and one COMMIT per write transaction of the store's.
    assert phases["bare: BEGIN, COMMIT"]["calls"] == 2 * report["write_transactions_per_turn"]
    assert phases["store: statements"]["calls"] >= phases["bare: statements"]["calls"] > 0
    # The parts are measured inside the turn; what is left of it is the Python around them.
    for side in ("store: Python in a store thread", "store: Python on the loop", "bare: Python"):
        assert phases[side]["ms"] > 0
    assert (
        phases["store: turn"]["ms"] > phases["store: in a store thread"]["ms"] > phases["store: COMMIT"]["ms"]
    )
    # The same read's CPU in place and handed to a store thread, at once and after the threads idled.
    assert set(report["read_cpu_us"]) == {"in_place", "handed_over", "handed_over_after_2ms_idle"}
    assert all(us > 0 for us in report["read_cpu_us"].values())
    # A call that does nothing: the hand-off and the answer alone, in the whole process's CPU.
    assert set(report["hop_cpu_us"]) == {"back_to_back", "after_2ms_idle"}
    assert all(us > 0 for us in report["hop_cpu_us"].values())
