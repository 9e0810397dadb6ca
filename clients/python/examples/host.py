"""A small Threadline host: one thread, driven from the terminal, kept in a file or by the server.

    python host.py --state thread.json "delete notes.txt"        # asks to approve, then resumes
    python host.py --state thread.json "client:local_time {\"tz\": \"Europe/Paris\"}"
    python host.py --state thread.json "count"                   # the counter lives in the state
    python host.py --state thread.json --fork branch.json "lookup grpc"
    python host.py --state lead.json --agent demo-lead "ask-child delete old.txt"   # runs the child here

    python host.py --thread thread_mine "delete notes.txt"       # the server keeps the thread
    python host.py --thread thread_mine "count"                  # same thread, by its ID only
    python host.py --thread thread_mine --watch                  # print each change of the thread
    python host.py --thread thread_mine --join run-...           # print a run's events, live or done
    python host.py --thread thread_mine --start "sleep 3"        # a background turn: run_id, events, result

With `--state` (HarnessService) the host owns the thread: after every run it writes the state
envelope to the file (proto3 JSON when the name ends in `.json`, binary protobuf otherwise) and,
while a run is suspended, the pending batch beside it (`<state>.pending.json`), so an interrupted
session can be answered later by running the script again without a prompt.

With `--thread` (ThreadService) the host keeps nothing: the server stores the thread under that ID
(created on first use) with its pending batch, so a later session, from anywhere, answers what is
pending by running the script again without a prompt.

With `--thread`, `--watch` prints the thread's snapshot and then each change (a run starting, a
commit, a run ending, ...) until the thread is deleted or the host is stopped, and `--join RUN`
prints the events of one run (`--after SEQ`: only those after that sequence) as it goes on, or as
it went if it finished; both reconnect by themselves when the connection breaks. `--start` runs the
prompt as a background turn (`start_run`): the server runs it with no client, so stopping the host
does not stop it; the host prints its run_id, then its events by joining it, and its result.

Either way, approvals are asked on the terminal; calls of the host's own client tools
(`local_time`, `word_count`) are executed here and their results sent back. With `--state`, a
Host-managed child the agent asks for (`--agent demo-lead`) runs here too, on its own thread kept
beside the parent's file (`<state>.<child thread>.json`), its own approvals asked the same way; its
result answers the parent's call.

Start a server first: `threadline serve` (the embedded demo agent needs no key).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import zoneinfo
from collections.abc import Callable
from pathlib import Path
from typing import Any

import threadline_client as tl

# --- the host's own tools: declared in every run, executed here, never on the server --------------


def local_time(tz: str = "UTC") -> str:
    """The current time in an IANA time zone."""
    try:
        zone = zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {tz!r}") from None
    return datetime.datetime.now(zone).strftime("%Y-%m-%d %H:%M %Z")


def word_count(text: str) -> int:
    """How many words a text has."""
    return len(text.split())


TOOLS: dict[str, Callable[..., Any]] = {"local_time": local_time, "word_count": word_count}
CLIENT_TOOLS = [
    tl.client_tool(
        "local_time",
        {"type": "object", "properties": {"tz": {"type": "string", "description": "IANA zone, e.g. UTC"}}},
        description="The current local time in a time zone.",
    ),
    tl.client_tool(
        "word_count",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        description="Count the words of a text.",
    ),
]


# --- the thread's files ----------------------------------------------------------------------------


class ThreadFile:
    """The state envelope in one file, and the pending batch (if any) beside it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format: tl.StateFormat = "json" if path.suffix == ".json" else "binary"
        self.pending_path = path.with_name(path.name + ".pending.json")

    def load(self) -> tuple[tl.HarnessState | None, tl.DeferredToolRequests | None]:
        state = tl.load_state(self.path.read_bytes(), format=self.format) if self.path.exists() else None
        pending = None
        if self.pending_path.exists():
            pending = tl.message_from_json(
                tl.DeferredToolRequests, self.pending_path.read_text(encoding="utf-8")
            )
        return state, pending

    def save(self, state: tl.HarnessState | None, pending: tl.DeferredToolRequests | None) -> None:
        if state is not None:
            _write(
                self.path,
                tl.dump_state(state, format=self.format, indent=2 if self.format == "json" else None),
            )
        if pending is not None:
            _write(self.pending_path, tl.message_to_json(pending, indent=2).encode("utf-8"))
        else:
            self.pending_path.unlink(missing_ok=True)


def _write(path: Path, data: bytes) -> None:
    # Write then rename, so a crash never leaves half an envelope behind.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


# --- answering a suspended run ---------------------------------------------------------------------


async def ask(question: str) -> str:
    """Read a line from the terminal without blocking the event loop."""
    try:
        return (await asyncio.to_thread(input, question)).strip()
    except EOFError:
        return ""


Children = tuple[tl.Client, ThreadFile, str]
"""What running Host-managed children needs: the connection, the parent's file, and its agent."""


async def answer(
    batch: tl.DeferredToolRequests, children: Children | None = None
) -> list[tl.v1.ApprovalResult | tl.v1.CallResult]:
    answers: list[tl.v1.ApprovalResult | tl.v1.CallResult] = []
    for call in batch.approvals:
        reply = await ask(
            f"\nApprove {call.tool_name}({call.args_json})? [y = yes / anything else = deny reason] "
        )
        if reply.lower() in ("y", "yes"):
            answers.append(tl.approve(call, answered_by="terminal"))
        else:
            answers.append(tl.deny(call, reply or "The user denied this call.", answered_by="terminal"))
    for call in batch.calls:
        if call.child is not None and children is not None:
            answers.append(await run_child(call, *children))
            continue
        tool = TOOLS.get(call.tool_name)
        if tool is None:
            answers.append(tl.external_failure(call, f"This host has no tool named {call.tool_name!r}."))
            continue
        try:
            value = tool(**tl.call_args(call))
        except (TypeError, ValueError) as exc:
            print(f"[host] {call.tool_name} failed: {exc}", file=sys.stderr)
            answers.append(tl.external_failure(call, str(exc)))
        else:
            print(f"[host] ran {call.tool_name}({call.args_json}) -> {value!r}", file=sys.stderr)
            answers.append(tl.external_result(call, value, answered_by="host.py"))
    return answers


async def run_child(
    call: tl.DeferredToolCall, client: tl.Client, parent: ThreadFile, agent: str
) -> tl.v1.CallResult:
    """Run the child a parent's call asks for until it ends, and answer the call with its result.

    The child's state (and its batch, while it waits) is saved after every run beside the parent's
    file, so a later session continues it: a batch it left is answered first.
    """
    assert call.child is not None
    kept = ThreadFile(parent.path.with_name(f"{parent.path.name}.{call.child.thread_id}.json"))
    state, pending = kept.load()
    print(
        f"[host] {agent} asks for child {call.child.subagent_name} on {call.child.thread_id}", file=sys.stderr
    )
    while True:
        resume = (
            tl.resume(pending, await answer(pending, (client, kept, call.child.agent))) if pending else None
        )
        result = await client.run_child(call, state=state, deferred_resume=resume, client_tools=CLIENT_TOOLS)
        state = result.state or state
        pending = result.deferred if result.status == tl.RunStatus.SUSPENDED else None
        kept.save(state, pending)
        if pending is None:
            print(f"[host] child {call.child.thread_id} ended {result.status!s}", file=sys.stderr)
            return tl.child_answer(call, result, answered_by="host.py")


# --- a thread kept in a file (--state) ------------------------------------------------------------


def show(event: tl.RunEvent) -> None:
    """Print the model's text as it streams, and the tools it calls."""
    match tl.event_case(event):
        case "part_start" if event.part_start and event.part_start.kind == tl.v1.PartKind.TEXT:
            print(event.part_start.content, end="", flush=True)
        case "part_delta" if event.part_delta and event.part_delta.kind == tl.v1.PartKind.TEXT:
            print(event.part_delta.content_delta, end="", flush=True)
        case "tool_call" if event.tool_call:
            print(f"[tool] {event.tool_call.tool_name}({event.tool_call.args_json})", flush=True)
        case _:
            pass  # every other event (and cases newer than this host) is not shown


async def stream_once(client: tl.Client, spec: tl.RunSpec) -> tl.RunResult:
    """Run and show the model's text as it streams."""
    async with client.stream_run(spec) as stream:
        async for event in stream:
            show(event)
    print()
    assert stream.result is not None  # a stream without a result ends with a ThreadlineError instead
    return stream.result


async def drive(
    client: tl.Client,
    thread: ThreadFile,
    state: tl.HarnessState | None,
    *,
    agent: str,
    prompt: str | None = None,
    resume: tl.DeferredToolResume | None = None,
) -> tl.RunResult:
    """Run once, then answer and resume for as long as the run suspends."""
    while True:
        spec = tl.RunSpec(
            agent=agent, previous_state=state, client_tools=CLIENT_TOOLS, deferred_resume=resume
        )
        if prompt:
            spec.text = prompt
        result = await stream_once(client, spec)
        if result.state is not None:
            state = result.state
        pending = result.deferred if result.status == tl.RunStatus.SUSPENDED else None
        thread.save(state, pending)  # persist before asking: the answer may never come
        if pending is None:
            return result
        resume, prompt = tl.resume(pending, await answer(pending, (client, thread, agent))), None


async def file_session(args: argparse.Namespace) -> int:
    thread = ThreadFile(Path(args.state))
    state, pending = thread.load()
    async with tl.Client(args.server, token=args.token, timeout=args.timeout) as client:
        if args.fork:
            if state is None:
                print(f"nothing to fork: {thread.path} does not exist", file=sys.stderr)
                return 2
            thread = ThreadFile(Path(args.fork))
            state, pending = await client.fork_state(state), None
            print(f"[host] forked into {state.thread_id} ({thread.path})", file=sys.stderr)
            thread.save(state, None)
        if pending is None and not args.prompt:
            print("give a prompt (nothing is pending to resume)", file=sys.stderr)
            return 2

        result: tl.RunResult | None = None
        if pending is not None:
            # A batch left by an earlier session: answer it first.
            print(f"[host] {len(tl.pending(pending))} deferred call(s) wait for an answer", file=sys.stderr)
            replies = await answer(pending, (client, thread, args.agent))
            result = await drive(client, thread, state, agent=args.agent, resume=tl.resume(pending, replies))
            state = result.state or state
        if args.prompt:
            result = await drive(client, thread, state, agent=args.agent, prompt=args.prompt)
    assert result is not None
    return report(result)


# --- a thread the server keeps (--thread) ----------------------------------------------------------


async def drive_thread(
    client: tl.Client,
    thread_id: str,
    *,
    prompt: str | None = None,
    answers: tl.DeferredToolResults | None = None,
) -> tl.ThreadRunOutcome:
    """Run the thread's next turn, then answer for as long as it suspends. Nothing is saved here:
    the server commits every turn and keeps the pending batch, should the answer never come."""
    while True:
        async with client.threads.stream(
            thread_id, text=prompt, answers=answers, client_tools=CLIENT_TOOLS
        ) as stream:
            async for event in stream:
                show(event)
        print()
        outcome = stream.outcome
        assert outcome is not None  # a stream without a result ends with a ThreadlineError instead
        if outcome.result.status != tl.RunStatus.SUSPENDED or outcome.result.deferred is None:
            return outcome
        answers, prompt = tl.answers(*await answer(outcome.result.deferred)), None


async def thread_session(args: argparse.Namespace) -> int:
    """Reuse the thread with the given ID, or create it; answer what it waits on, then run the prompt."""
    async with tl.Client(args.server, token=args.token, timeout=args.timeout) as client:
        try:
            thread = await client.threads.get(args.thread)
            print(
                f"[host] {thread.thread_id} is at revision {thread.revision}, {thread.status!s}",
                file=sys.stderr,
            )
        except tl.ThreadNotFound:
            thread = await client.threads.create(thread_id=args.thread)
            print(f"[host] created {thread.thread_id}", file=sys.stderr)
        if thread.pending is None and not args.prompt:
            print("give a prompt (nothing is pending to resume)", file=sys.stderr)
            return 2

        outcome: tl.ThreadRunOutcome | None = None
        if thread.pending is not None:
            # A batch left by an earlier session (or another host): answer it first.
            print(
                f"[host] {len(tl.pending(thread.pending))} deferred call(s) wait for an answer",
                file=sys.stderr,
            )
            replies = await answer(thread.pending)
            outcome = await drive_thread(client, thread.thread_id, answers=tl.answers(*replies))
        if args.prompt:
            outcome = await drive_thread(client, thread.thread_id, prompt=args.prompt)
    assert outcome is not None
    print(f"[host] {thread.thread_id} is now at revision {outcome.revision}", file=sys.stderr)
    return report(outcome.result)


# --- following a thread the server keeps (--join, --watch) ---------------------------------------


async def join_session(args: argparse.Namespace) -> int:
    """Print the events of one run of the thread, from `--after` on, until it ends."""
    async with (
        tl.Client(args.server, token=args.token, timeout=args.timeout) as client,
        client.threads.join_run(args.thread, run_id=args.join, after_sequence=args.after) as joined,
    ):
        async for event in joined:
            print(f"{event.sequence} {tl.event_case(event) or '?'}{describe(event)}", flush=True)
    if joined.reconnects:
        print(f"[host] reconnected {joined.reconnects} time(s)", file=sys.stderr)
    outcome = joined.outcome
    if outcome is None:
        print(f"[host] nothing after sequence {args.after}", file=sys.stderr)
        return 0
    print(f"[host] {args.thread} is at revision {outcome.revision}", file=sys.stderr)
    return report(outcome.result)


async def start_session(args: argparse.Namespace) -> int:
    """Start the prompt as a background turn of the thread, then print its events and its result."""
    async with tl.Client(args.server, token=args.token, timeout=args.timeout) as client:
        try:
            await client.threads.get(args.thread)
        except tl.ThreadNotFound:
            await client.threads.create(thread_id=args.thread)
            print(f"[host] created {args.thread}", file=sys.stderr)
        started = await client.threads.start_run(args.thread, text=args.prompt, client_tools=CLIENT_TOOLS)
        print(f"started {started.run_id}", flush=True)
        print(
            f"[host] request {started.request_id} runs in the background from revision {started.revision};"
            f" stopping this host does not stop it (--join {started.run_id} follows it)",
            file=sys.stderr,
        )
        joined = started.events()  # by request: a next attempt too, should its server be lost
        try:
            async with joined:
                async for event in joined:
                    print(f"{event.sequence} {tl.event_case(event) or '?'}{describe(event)}", flush=True)
        except (tl.RunAttemptLost, tl.RunEventsExpired) as ended:
            print(f"[host] the join ended {ended.reason}; reading how the request ended", file=sys.stderr)
        # `result()` reads an end no join shows too: a request the server closed (cancelled after its
        # server was lost, interrupted after too many attempts) raises its error, e.g. RequestInterrupted.
        outcome = joined.outcome or await started.result()
    print(f"[host] {args.thread} is at revision {outcome.revision}", file=sys.stderr)
    if outcome.result.status == tl.RunStatus.SUSPENDED:
        print("[host] it waits for answers: run this host again with --thread and no prompt", file=sys.stderr)
    return report(outcome.result)


def describe(event: tl.RunEvent) -> str:
    """A few words on what an event says, for `--join`."""
    match tl.event_case(event):
        case "part_delta" if event.part_delta:
            return f" {event.part_delta.content_delta!r}"
        case "tool_call" if event.tool_call:
            return f" {event.tool_call.tool_name}({event.tool_call.args_json})"
        case "tool_result" if event.tool_result:
            return f" {event.tool_result.tool_name}"
        case "thread_committed" if event.thread_committed:
            return f" revision {event.thread_committed.revision} {event.thread_committed.kind!s}"
        case "events_omitted" if event.events_omitted:
            return f" from {event.events_omitted.first_sequence} ({event.events_omitted.reason!s})"
        case "result" if event.result:
            return f" {event.result.status!s}"
        case _:
            return ""


async def watch_session(args: argparse.Namespace) -> int:
    """Print the thread's snapshot, then each change, until the thread is deleted."""
    seen = False
    async with (
        tl.Client(args.server, token=args.token, timeout=args.timeout) as client,
        client.threads.watch_thread(args.thread) as watch,
    ):
        try:
            async for thread, change_sequence, changes in watch:
                seen = True
                kinds = ",".join(change.name or str(change.value) for change in changes)
                run = f" run {thread.lease.run_id}" if thread.lease is not None else ""
                print(
                    f"{change_sequence} {kinds} {thread.status!s} revision {thread.revision}{run}",
                    flush=True,
                )
        except tl.ThreadNotFound:
            if not seen:
                raise
            print(f"[host] {args.thread} was deleted", file=sys.stderr)
    return 0


# --- how it ended ----------------------------------------------------------------------------------


def report(result: tl.RunResult) -> int:
    """Say how the last run ended; returns the exit status."""
    if result.status == tl.RunStatus.COMPLETED:
        print(f"[host] {result.thread_id} {result.run_id}: {tl.output(result)!r}", file=sys.stderr)
        return 0
    failure = result.failure
    detail = f"{failure.code}: {failure.message}" if failure is not None else ""
    print(f"[host] the run ended {result.status!s} {detail}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Drive one Threadline thread, kept in a file or by the server."
    )
    parser.add_argument("prompt", nargs="?", default="", help="what to say; omit to answer a pending batch")
    kept = parser.add_mutually_exclusive_group(required=True)
    kept.add_argument("--state", help="the thread's state file (.json = proto3 JSON, else binary)")
    kept.add_argument(
        "--thread",
        metavar="THREAD_ID",
        help="a thread the server keeps (ThreadService), created on first use",
    )
    parser.add_argument(
        "--fork", metavar="NEW_STATE", help="with --state: branch the thread into this new state file first"
    )
    parser.add_argument(
        "--agent", default="", help="with --state: the served agent to run (default: the server's default)"
    )
    follow = parser.add_mutually_exclusive_group()
    follow.add_argument(
        "--join", metavar="RUN", help="with --thread: print the events of this run (live or finished)"
    )
    follow.add_argument("--watch", action="store_true", help="with --thread: print each change of the thread")
    follow.add_argument(
        "--start",
        action="store_true",
        help="with --thread: run the prompt in the background, then print its run_id, events and result",
    )
    parser.add_argument(
        "--after", metavar="SEQ", type=int, default=None, help="with --join: only events after this sequence"
    )
    parser.add_argument("--server", default=tl.DEFAULT_TARGET, help="host:port of `threadline serve`")
    parser.add_argument("--token", default=None, help="bearer token, for a server started with --token")
    parser.add_argument("--timeout", type=float, default=120.0, help="deadline of each call, in seconds")
    args = parser.parse_args(argv)
    if args.fork and not args.state:
        parser.error("--fork needs --state")
    if args.agent and not args.state:
        parser.error("--agent needs --state (a server-kept thread has its agent already)")
    if (args.join or args.watch) and not args.thread:
        parser.error("--join and --watch need --thread")
    if (args.join or args.watch) and args.prompt:
        parser.error("--join and --watch run no prompt")
    if args.after is not None and not args.join:
        parser.error("--after needs --join")
    if args.start and not (args.thread and args.prompt):
        parser.error("--start needs --thread and a prompt")
    if args.join:
        session = join_session(args)
    elif args.start:
        session = start_session(args)
    elif args.watch:
        session = watch_session(args)
    else:
        session = thread_session(args) if args.thread else file_session(args)
    try:
        return asyncio.run(session)
    except tl.ThreadlineError as exc:
        print(f"[host] error: {exc}", file=sys.stderr)
        if exc.reason:
            print(f"[host] reason {exc.reason} {dict(exc.metadata)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
