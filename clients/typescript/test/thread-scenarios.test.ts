// The shared threads scenarios (THREADS.md §7), driven end to end through `client.threads` against a
// real server: `THREADLINE_ADDR`, or `threadline serve --port 0 --store memory` started here. Its
// "default" agent is the scripted demo (server/demo.py): `delete <path>` asks for approval,
// `lookup` calls a plain tool, `count` bumps a counter in capability state, `sleep <s>` sleeps,
// `client:<name> {json}` calls a client tool the host declared, and anything else is echoed.
// Mirrors clients/python/tests/test_thread_scenarios.py, test by test.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { type Server, type Socket, connect, createServer } from "node:net";
import { describe, test } from "node:test";

import { equals, isMessage } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";

import {
  type AnsweredBy,
  CheckpointKind,
  CheckpointNotFound,
  Code,
  type DeferredToolCall,
  DeferredKind,
  MessageHistorySchema,
  RequestIdReused,
  RevisionConflict,
  type RunEvent,
  type RunResult,
  RunEventsExpired,
  RunNotFound,
  RunStatus,
  type Thread,
  ThreadBusy,
  ThreadExists,
  ThreadNotFound,
  ThreadNotSuspended,
  ThreadQueueFull,
  ProtocolError,
  QueuedRunKind,
  RECONNECT_RETRIES,
  RUN_RETRIES,
  RunEventSchema,
  RunResultSchema,
  ThreadChange,
  type ThreadUpdate,
  StreamThreadRunResponseSchema,
  ThreadRunStatus,
  type ThreadRunOutcome,
  type ThreadRunStream,
  ThreadStatus,
  ThreadStoreKind,
  type ThreadlineClient,
  ThreadlineError,
  answers,
  approve,
  createThreadlineClient,
  deny,
  externalResult,
  newRequestId,
  pendingCalls,
} from "../src/index.js";
import { ErrorInfoSchema } from "../src/googleapis/google/rpc/error_details_pb.js";
import { isThreadlineError } from "./checks.js";
import { client, server } from "./suite.js";

const TOKEN = process.env["THREADLINE_TOKEN"];

const GET_WEATHER = {
  name: "get_weather",
  description: "The weather in a city.",
  parametersJsonSchema: JSON.stringify({
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  }),
};

function freshId(what = "sdk"): string {
  return `thread_${what}${randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

function cases(events: RunEvent[]): (string | undefined)[] {
  return events.map((event) => event.event.case);
}

/** The run's output, parsed from `output_json`. */
function output(result: RunResult): unknown {
  return JSON.parse(result.outputJson) as unknown;
}

function callArgs(call: DeferredToolCall): unknown {
  return JSON.parse(call.argsJson) as unknown;
}

/** Every item a thread iterable yields. */
async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const seen: T[] = [];
  for await (const item of items) seen.push(item);
  return seen;
}

/** The request IDs the thread's checkpoints were committed by, oldest first, each run once. */
async function requestOrder(threadId: string): Promise<string[]> {
  return (await all(client.threads.checkpoints(threadId)))
    .reverse()
    .map((checkpoint) => checkpoint.requestId)
    .filter((requestId, i, ids) => requestId !== "" && requestId !== ids[i - 1]);
}

/** Every event of a thread run stream, and its outcome. */
async function drain(stream: ThreadRunStream): Promise<{ events: RunEvent[]; outcome: ThreadRunOutcome }> {
  const events = await all(stream);
  const outcome = stream.outcome;
  assert.ok(outcome !== undefined, `no result after ${cases(events).join(" ")}`);
  return { events, outcome };
}

/** The same events: the same sequences, the same contents (what the server encoded once). */
function sameEvents(got: RunEvent[], want: RunEvent[], what: string): void {
  assert.deepEqual(cases(got), cases(want), what);
  assert.deepEqual(
    got.map((event) => event.sequence),
    want.map((event) => event.sequence),
    what,
  );
  got.forEach((event, i) => assert.ok(equals(RunEventSchema, event, want[i]!), `${what}: event ${i}`));
}

/** A new thread suspended on the approval of `delete_file(path)`, and that call. */
async function suspendedOnDelete(path = "notes.txt"): Promise<{ thread: Thread; call: DeferredToolCall }> {
  const made = await client.threads.create();
  const outcome = await client.threads.run(made.threadId, { text: `delete ${path}` });
  assert.equal(outcome.result.status, RunStatus.SUSPENDED);
  const thread = await client.threads.get(made.threadId);
  assert.equal(thread.status, ThreadStatus.SUSPENDED);
  assert.ok(thread.pending !== undefined);
  assert.equal(thread.pending.approvals.length, 1);
  assert.equal(thread.pending.calls.length, 0);
  const call = thread.pending.approvals[0]!;
  assert.deepEqual([call.toolName, callArgs(call)], ["delete_file", { path }]);
  return { thread, call };
}

/**
 * A stream of a run that sleeps 30 s, read until the `sleep` tool is called; and the run's ID.
 *
 * Waiting for the tool call (not only `runStarted`) cancels a run that is inside a tool, clear of
 * its checkpoint boundaries, as the Python suite does. The stream's deadline (25 s) is below the
 * sleep, so a cancel that did not reach the run fails the test instead of waiting the sleep out.
 */
async function sleeping(threadId: string): Promise<{ stream: ThreadRunStream; runId: string }> {
  const stream = client.threads.stream(threadId, { text: "sleep 30", timeoutMs: 25_000 });
  const first = await stream.next();
  assert.ok(first.done !== true);
  assert.equal(first.value.event.case, "runStarted");
  assert.match(first.value.runId, /^run-/);
  for (;;) {
    const next = await stream.next();
    assert.ok(next.done !== true, "the stream ended before the sleep tool was called");
    if (next.value.event.case === "toolCall") {
      assert.equal(next.value.event.value.toolName, "sleep");
      break;
    }
  }
  return { stream, runId: first.value.runId };
}

describe("create, get, list, delete", () => {
  test("create, get, list and delete", async () => {
    const label = randomUUID().replaceAll("-", "");
    const made = await client.threads.create({ labels: { suite: label, n: "1" } });

    assert.match(made.threadId, /^thread_/);
    assert.equal(made.agent, "default");
    assert.deepEqual([made.status, made.revision, made.labels], [ThreadStatus.IDLE, 1n, { suite: label, n: "1" }]);
    assert.equal(made.head?.kind, CheckpointKind.CREATED);
    assert.equal(made.head.state, undefined);
    assert.equal(made.pending, undefined);
    assert.equal(made.lease, undefined);
    assert.equal(made.recoveryPending, false);
    const full = await client.threads.get(made.threadId, { full: true });
    assert.ok(full.head?.state !== undefined);
    assert.equal(full.head.state.threadId, made.threadId);
    assert.equal((await client.threads.get(made.threadId)).head?.state, undefined);

    const chosen = freshId();
    assert.equal((await client.threads.create({ threadId: chosen, labels: { suite: label } })).threadId, chosen);
    await assert.rejects(client.threads.create({ threadId: chosen }), (err: unknown) => {
      assert.ok(err instanceof ThreadExists && err instanceof ThreadlineError);
      assert.deepEqual([err.code, err.reason, err.name], [Code.AlreadyExists, "THREAD_EXISTS", "ThreadExists"]);
      return true;
    });
    const third = await client.threads.create({ labels: { suite: label } });

    const every = [made.threadId, chosen, third.threadId].sort();
    const ids = async (items: AsyncIterable<Thread>) => (await all(items)).map((thread) => thread.threadId);
    assert.deepEqual((await ids(client.threads.list({ labels: { suite: label } }))).sort(), every);
    const walked = await ids(client.threads.list({ labels: { suite: label }, pageSize: 1 }));
    assert.deepEqual([...walked].sort(), every, "every page, each thread once");
    const page = await client.threads.listPage({ labels: { suite: label }, pageSize: 2 });
    assert.equal(page.threads.length, 2);
    assert.notEqual(page.nextPageToken, "");
    assert.deepEqual(await ids(client.threads.list({ labels: { suite: label, n: "1" } })), [made.threadId]);
    assert.deepEqual(await ids(client.threads.list({ labels: { suite: label }, status: ThreadStatus.SUSPENDED })), []);

    await assert.rejects(client.threads.delete(chosen, { expectedRevision: 5 }), (err: unknown) => {
      assert.ok(err instanceof RevisionConflict);
      assert.equal(err.currentRevision, 1n);
      return true;
    });
    await client.threads.delete(chosen, { expectedRevision: 1n });
    await client.threads.delete(third.threadId);
    await assert.rejects(client.threads.get(chosen), (err: unknown) => {
      assert.ok(err instanceof ThreadNotFound);
      assert.deepEqual([err.code, err.reason], [Code.NotFound, "THREAD_NOT_FOUND"]);
      return true;
    });
    assert.deepEqual(await ids(client.threads.list({ labels: { suite: label } })), [made.threadId]);
  });

  test("missing checkpoints, runs and threads are typed", async () => {
    const thread = await client.threads.create();
    await assert.rejects(client.threads.checkpoint(thread.threadId, 99), CheckpointNotFound);
    await assert.rejects(client.threads.cancel(thread.threadId, `run-${randomUUID().replaceAll("-", "")}`), RunNotFound);
    await assert.rejects(client.threads.run(freshId("missing"), { text: "hello" }), ThreadNotFound);
    await assert.rejects(all(client.threads.checkpoints(freshId("missing"))), ThreadNotFound);
  });

  test("server info names the thread store", async () => {
    const info = await client.getServerInfo();
    assert.equal(info.threadStore?.kind, ThreadStoreKind.MEMORY);
  });
});

describe("import", () => {
  test("a suspended state imported with its batch is answered by call ID", async () => {
    const held = await client.run({ prompt: "delete notes.txt" }); // HarnessService: the host holds it
    assert.equal(held.status, RunStatus.SUSPENDED);
    assert.ok(held.state !== undefined && held.deferred !== undefined);

    const thread = await client.threads.create({ state: held.state, pending: held.deferred });

    assert.equal(thread.threadId, held.state.threadId);
    assert.equal(thread.status, ThreadStatus.SUSPENDED);
    assert.equal(thread.head?.kind, CheckpointKind.IMPORTED);
    assert.ok(thread.pending !== undefined);
    assert.equal(thread.pending.approvals.length, 1);
    const call = thread.pending.approvals[0]!; // answered from what the thread says, not from `held`
    assert.equal(call.toolCallId, held.deferred.approvals[0]!.toolCallId);

    const outcome = await client.threads.run(thread.threadId, { answers: answers(approve(call)) });

    assert.equal(outcome.result.status, RunStatus.COMPLETED);
    assert.equal(output(outcome.result), "Tool results: delete_file: Deleted notes.txt.");
    const afterwards = await client.threads.get(thread.threadId);
    assert.deepEqual(
      [afterwards.status, afterwards.pending, afterwards.revision],
      [ThreadStatus.IDLE, undefined, outcome.revision],
    );
  });

  test("an import whose batch does not match its state is refused", async () => {
    const held = await client.run({ prompt: "delete notes.txt" });
    const empty = await client.newState();
    assert.ok(held.deferred !== undefined);

    await assert.rejects(client.threads.create({ state: empty, pending: held.deferred }), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.deepEqual([err.code, err.reason], [Code.FailedPrecondition, "DEFERRED_REQUEST_MISSING"]);
      return true;
    });
    await assert.rejects(client.threads.get(empty.threadId), ThreadNotFound);
  });
});

describe("streaming a turn", () => {
  test("stream a turn", async () => {
    const thread = await client.threads.create();

    const stream = client.threads.stream(thread.threadId, { text: "lookup threadline" });
    const events = await all(stream);

    const kinds = cases(events);
    assert.deepEqual(
      events.map((event) => event.sequence),
      events.map((_, index) => BigInt(index)),
    );
    assert.equal(kinds[0], "runStarted");
    assert.deepEqual(kinds.slice(-2), ["threadCommitted", "result"]);
    assert.equal(kinds.filter((kind) => kind === "result").length, 1);
    assert.ok(!kinds.includes("checkpointCandidate"));
    for (const kind of ["toolCall", "toolResult", "partDelta"]) {
      assert.ok(kinds.includes(kind), `a ${kind} event`);
    }
    assert.ok(events.every((event) => event.threadId === thread.threadId));
    const commits = events.flatMap((event) => (event.event.case === "threadCommitted" ? [event.event.value] : []));
    const revisions = commits.map((commit) => commit.revision);
    assert.deepEqual(revisions, [...new Set(revisions)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    assert.ok(revisions[0]! > thread.revision);
    assert.deepEqual(
      commits.slice(0, -1).map((commit) => commit.kind),
      commits.slice(0, -1).map(() => CheckpointKind.MID_RUN),
    );
    assert.equal(commits.at(-1)!.kind, CheckpointKind.COMPLETED);
    assert.ok(!commits.some((commit) => commit.replayed));

    const outcome = stream.outcome;
    assert.ok(outcome !== undefined);
    assert.deepEqual(await stream.collect(), outcome);
    const { result } = outcome;
    assert.equal(result.status, RunStatus.COMPLETED);
    assert.equal(result.state, undefined, "the state is the checkpoint");
    assert.equal(result.requestId, stream.requestId);
    assert.match(stream.requestId, /^req-[0-9a-f]{32}$/);
    assert.equal(result.threadId, thread.threadId);
    assert.deepEqual([outcome.revision, outcome.replayed], [revisions.at(-1), false]);
    assert.equal((await client.threads.get(thread.threadId)).revision, outcome.revision);
    const head = await client.threads.checkpoint(thread.threadId, outcome.revision);
    assert.equal(head.kind, CheckpointKind.COMPLETED);
    assert.equal(head.requestId, stream.requestId);
    assert.ok(head.state?.messageHistory !== undefined);
    assert.ok(head.state.messageHistory.data.includes("lookup"));

    const listed = await all(client.threads.checkpoints(thread.threadId, { pageSize: 2 }));
    assert.deepEqual(
      listed.map((checkpoint) => checkpoint.revision),
      Array.from({ length: Number(outcome.revision) }, (_, index) => outcome.revision - BigInt(index)),
      "newest first, every page",
    );
    assert.ok(listed.every((checkpoint) => checkpoint.state === undefined));

    const second = await client.threads.stream(thread.threadId, { text: "hello" }).collect();
    assert.ok(second.revision > outcome.revision);
    assert.equal(output(second.result), "You said: hello");
  });
});

describe("deferred calls", () => {
  test("approve and deny by answers", async () => {
    const { thread, call } = await suspendedOnDelete();

    const approved = await client.threads.stream(thread.threadId, { answers: answers(approve(call)) }).collect();
    assert.equal(output(approved.result), "Tool results: delete_file: Deleted notes.txt.");

    const deniedOn = await client.threads.run(thread.threadId, { text: "delete b.txt" });
    assert.ok(deniedOn.result.deferred !== undefined);
    assert.equal(deniedOn.result.deferred.approvals.length, 1);
    const other = deniedOn.result.deferred.approvals[0]!;
    const denied = await client.threads.run(thread.threadId, { answers: answers(deny(other, "keep it")) });
    assert.equal(output(denied.result), "Tool results: delete_file: keep it");

    await assert.rejects(client.threads.run(thread.threadId, { answers: answers(approve(other)) }), (err: unknown) => {
      assert.ok(err instanceof ThreadNotSuspended);
      assert.deepEqual([err.code, err.reason], [Code.FailedPrecondition, "THREAD_NOT_SUSPENDED"]);
      return true;
    });
  });

  test("an incomplete answer is refused and the thread stays suspended", async () => {
    const { thread } = await suspendedOnDelete();
    await assert.rejects(client.threads.run(thread.threadId, { answers: answers() }), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.reason, "DEFERRED_RESULTS_INCOMPLETE");
      return true;
    });
    assert.equal((await client.threads.get(thread.threadId)).status, ThreadStatus.SUSPENDED);
  });

  test("a client tool is answered without declaring it again", async () => {
    const thread = await client.threads.create();
    const first = await client.threads.run(thread.threadId, {
      text: 'client:get_weather {"city":"Paris"}',
      clientTools: [GET_WEATHER],
    });
    assert.equal(first.result.status, RunStatus.SUSPENDED);
    assert.ok(first.result.deferred !== undefined);
    assert.equal(first.result.deferred.calls.length, 1);
    const call = first.result.deferred.calls[0]!;
    assert.equal(call.kind, DeferredKind.EXTERNAL);
    assert.deepEqual(callArgs(call), { city: "Paris" });
    const head = await client.threads.checkpoint(thread.threadId, first.revision);
    assert.deepEqual(
      head.clientTools.map((tool) => tool.name),
      ["get_weather"],
    );

    // No client tools declared: the pending call meets the tools the head was made with.
    const done = await client.threads.run(thread.threadId, {
      answers: answers(externalResult(call, { sky: "clear", temp_c: 21 })),
    });

    assert.equal(done.result.status, RunStatus.COMPLETED);
    const text = output(done.result);
    assert.equal(typeof text, "string");
    assert.ok((text as string).startsWith("Tool results: get_weather:"), String(text));
    assert.ok((text as string).includes("21") && (text as string).includes("clear"), String(text));
  });
});

describe("fork and rollback", () => {
  test("a fork of a suspended thread is suspended on the same calls", async () => {
    const { thread: source, call } = await suspendedOnDelete();
    const label = randomUUID().replaceAll("-", "");

    const fork = await client.threads.fork(source.threadId, { labels: { fork: label } });

    assert.notEqual(fork.threadId, source.threadId);
    assert.deepEqual(fork.labels, { fork: label });
    assert.deepEqual([fork.status, fork.revision], [ThreadStatus.SUSPENDED, 1n]);
    assert.equal(fork.head?.kind, CheckpointKind.FORKED);
    assert.ok(fork.pending !== undefined);
    assert.deepEqual(
      pendingCalls(fork.pending).map(({ call: pending }) => pending.toolCallId),
      [call.toolCallId],
    );

    const done = await client.threads.run(fork.threadId, { answers: answers(approve(fork.pending.approvals[0]!)) });
    assert.equal(output(done.result), "Tool results: delete_file: Deleted notes.txt.");
    assert.equal((await client.threads.get(source.threadId)).status, ThreadStatus.SUSPENDED, "source untouched");

    await assert.rejects(client.threads.fork(source.threadId, { newThreadId: source.threadId }), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.reason, "FORK_THREAD_ID_CONFLICT");
      return true;
    });
    await assert.rejects(client.threads.fork(source.threadId, { newThreadId: fork.threadId }), ThreadExists);
    await assert.rejects(client.threads.fork(source.threadId, { revision: 999 }), CheckpointNotFound);
  });

  test("rollback makes an earlier checkpoint current", async () => {
    const thread = await client.threads.create();
    const once = await client.threads.run(thread.threadId, { text: "count" });
    const twice = await client.threads.run(thread.threadId, { text: "count" });
    assert.equal(output(once.result), "Tool results: count: 1");
    assert.equal(output(twice.result), "Tool results: count: 2");

    await assert.rejects(
      client.threads.rollback(thread.threadId, once.revision, { expectedRevision: once.revision }),
      (err: unknown) => {
        assert.ok(err instanceof RevisionConflict);
        assert.equal(err.currentRevision, twice.revision);
        return true;
      },
    );
    const rolled = await client.threads.rollback(thread.threadId, once.revision, { expectedRevision: twice.revision });

    assert.equal(rolled.revision, twice.revision + 1n);
    assert.equal(rolled.status, ThreadStatus.IDLE);
    assert.equal(rolled.head?.kind, CheckpointKind.ROLLED_BACK);
    const again = await client.threads.run(thread.threadId, { text: "count" });
    assert.equal(output(again.result), "Tool results: count: 2", "the counter came back with the checkpoint");
    await assert.rejects(client.threads.rollback(thread.threadId, 999), CheckpointNotFound);
  });
});

describe("cancel, busy, conflict", () => {
  test("cancel ends the run cancelled", async () => {
    const thread = await client.threads.create();
    const { stream, runId } = await sleeping(thread.threadId);
    let outcome;
    try {
      const status = await client.threads.cancel(thread.threadId, runId);
      assert.ok([ThreadRunStatus.RUNNING, ThreadRunStatus.CANCELLED].includes(status), ThreadRunStatus[status]);
      outcome = await stream.collect(); // well before the 30 s sleep would end (the stream's deadline is 25 s)
    } finally {
      await stream.close();
    }

    assert.equal(outcome.result.status, RunStatus.CANCELLED);
    assert.equal(outcome.result.runId, runId);
    const head = await client.threads.checkpoint(thread.threadId, outcome.revision);
    assert.equal(head.kind, CheckpointKind.CANCELLED);
    assert.equal(head.runId, runId);
    assert.equal(await client.threads.cancel(thread.threadId, runId), ThreadRunStatus.CANCELLED);
    assert.equal((await client.threads.get(thread.threadId)).status, ThreadStatus.IDLE);
  });

  test("a cancel right after runStarted ends the run cancelled", async () => {
    // The cancel lands while the server commits the run's first checkpoints, not inside a tool;
    // each of the ten lands at a different point of the first model request.
    for (let i = 0; i < 10; i++) {
      const thread = await client.threads.create();
      const stream = client.threads.stream(thread.threadId, { text: "sleep 30", timeoutMs: 20_000 });
      let outcome;
      try {
        const first = await stream.next();
        assert.ok(first.done !== true);
        await client.threads.cancel(thread.threadId, first.value.runId);
        outcome = await stream.collect();
      } finally {
        await stream.close();
      }
      assert.equal(outcome.result.status, RunStatus.CANCELLED);
      assert.equal((await client.threads.get(thread.threadId)).status, ThreadStatus.IDLE);
    }
  });

  test("a second run while one runs is busy", async () => {
    const thread = await client.threads.create();
    const { stream, runId } = await sleeping(thread.threadId);
    let first;
    try {
      const running = await client.threads.get(thread.threadId);
      assert.equal(running.status, ThreadStatus.RUNNING);
      assert.ok(running.lease !== undefined);
      assert.deepEqual([running.lease.runId, running.lease.requestId], [runId, stream.requestId]);

      for (const busyCall of [
        () => client.threads.run(thread.threadId, { text: "hello" }),
        // (A retry of the running request itself attaches to it instead: LIVE §2.5, below.)
        () => client.threads.delete(thread.threadId),
      ]) {
        await assert.rejects(busyCall(), (err: unknown) => {
          assert.ok(err instanceof ThreadBusy);
          assert.deepEqual([err.code, err.reason], [Code.Aborted, "THREAD_BUSY"]);
          assert.deepEqual([err.runId, err.requestId], [runId, stream.requestId]);
          const expires = err.leaseExpiresAt;
          assert.ok(expires !== undefined, `lease_expires_at ${JSON.stringify(err.metadata)}`);
          assert.ok(expires.getTime() > Date.now() - 5 * 60_000);
          return true;
        });
      }

      await client.threads.cancel(thread.threadId, runId);
      first = await stream.collect();
    } finally {
      await stream.close();
    }

    // Once it finished, the retry gets its stored outcome.
    const retried = await client.threads.run(thread.threadId, { text: "sleep 30", requestId: stream.requestId });
    assert.ok(retried.replayed);
    assert.equal(retried.result.status, RunStatus.CANCELLED);
    assert.deepEqual([retried.result.runId, retried.revision], [runId, first.revision]);
  });

  test("a stale expected revision is a conflict", async () => {
    const thread = await client.threads.create();
    const moved = await client.threads.run(thread.threadId, { text: "hello", expectedRevision: thread.revision });
    assert.ok(moved.revision > thread.revision);

    await assert.rejects(
      client.threads.run(thread.threadId, { text: "hello", expectedRevision: thread.revision }),
      (err: unknown) => {
        assert.ok(err instanceof RevisionConflict);
        assert.deepEqual([err.code, err.reason], [Code.Aborted, "REVISION_CONFLICT"]);
        assert.equal(err.currentRevision, moved.revision);
        return true;
      },
    );
    assert.equal((await client.threads.get(thread.threadId)).revision, moved.revision, "nothing ran");
    await assert.rejects(
      client.threads.stream(thread.threadId, { text: "hello", expectedRevision: 1 }).collect(),
      RevisionConflict,
    );
  });
});

describe("request IDs: retry, replay, reuse", () => {
  test("the same request ID runs once and replays", async () => {
    const thread = await client.threads.create();
    const requestId = `req-${randomUUID().replaceAll("-", "")}`;
    const spec = { text: "hello", requestId, expectedRevision: thread.revision };

    const first = await client.threads.run(thread.threadId, spec);
    // The retry carries the now stale expectedRevision: a finished request is replayed regardless.
    const again = await client.threads.run(thread.threadId, spec);
    const stream = client.threads.stream(thread.threadId, spec);
    const replayEvents = await all(stream);

    assert.ok(!first.replayed && again.replayed);
    assert.equal(again.revision, first.revision);
    assert.equal(again.result.runId, first.result.runId);
    assert.equal(again.result.requestId, requestId);
    assert.equal(output(again.result), "You said: hello");
    assert.equal(output(first.result), "You said: hello");
    assert.deepEqual(cases(replayEvents), ["runStarted", "threadCommitted", "result"]);
    assert.ok(stream.outcome?.replayed === true);
    assert.equal(stream.outcome.revision, first.revision);
    assert.ok(replayEvents.every((event) => event.runId === first.result.runId));
    // One run: the thread did not move, and every checkpoint of the request has the same run.
    assert.equal((await client.threads.get(thread.threadId)).revision, first.revision);
    const checkpoints = await all(client.threads.checkpoints(thread.threadId));
    const runs = new Set(checkpoints.filter((c) => c.requestId === requestId).map((c) => c.runId));
    assert.deepEqual([...runs], [first.result.runId]);

    await assert.rejects(client.threads.run(thread.threadId, { text: "something else", requestId }), (err: unknown) => {
      assert.ok(err instanceof RequestIdReused);
      assert.deepEqual([err.code, err.reason], [Code.InvalidArgument, "REQUEST_ID_REUSED"]);
      return true;
    });
  });

  test("run retries a lost answer with the same request ID", async () => {
    const thread = await client.threads.create();
    const proxy = await cuttingProxy(new URL(server.baseUrl).host);
    const cut = createThreadlineClient({ baseUrl: proxy.addr, token: TOKEN, timeoutMs: 60_000, runTimeoutMs: 60_000 });
    let outcome;
    try {
      outcome = await cut.threads.run(thread.threadId, { text: "hello" });
    } finally {
      cut.close();
      await proxy.close();
    }

    // The first attempt ran and committed; its answer was lost, so the SDK sent the request again
    // under the same ID, and the server answered it from its record instead of running it twice.
    assert.deepEqual(proxy.seen, ["cut", "passed"]);
    assert.ok(outcome.replayed);
    assert.equal(outcome.result.status, RunStatus.COMPLETED);
    assert.equal(output(outcome.result), "You said: hello");
    const afterwards = await client.threads.get(thread.threadId);
    assert.equal(afterwards.revision, outcome.revision);
    const runs = new Set((await all(client.threads.checkpoints(thread.threadId))).map((c) => c.runId).filter((id) => id !== ""));
    assert.deepEqual([...runs], [outcome.result.runId]);
  });
});

describe("error metadata: who answered, what the original did, whose run holds the thread (LIVE §5.5)", () => {
  /**
   * A thread suspended on `delete_file(a.txt)`'s approval, then continued by the prompt "never mind"
   * without answers (request `neverMind`): that call, the SUSPENDED revision and the prompt's outcome.
   */
  async function promptedPastApproval(): Promise<{
    threadId: string;
    call: DeferredToolCall;
    suspendedAt: bigint;
    neverMind: string;
    moved: ThreadRunOutcome;
  }> {
    const { thread, call } = await suspendedOnDelete("a.txt");
    const neverMind = newRequestId();
    const moved = await client.threads.run(thread.threadId, { text: "never mind", requestId: neverMind });
    assert.equal(moved.result.status, RunStatus.COMPLETED);
    assert.ok(moved.revision > thread.revision);
    assert.equal((await client.threads.get(thread.threadId)).status, ThreadStatus.IDLE);
    return { threadId: thread.threadId, call, suspendedAt: thread.revision, neverMind, moved };
  }

  test("answers after a prompt took the batch are ThreadNotSuspended naming that prompt", async () => {
    const { threadId, call, suspendedAt, neverMind, moved } = await promptedPastApproval();
    await assert.rejects(client.threads.run(threadId, { answers: answers(approve(call)), requestId: newRequestId() }), (err: unknown) => {
      assert.ok(err instanceof ThreadNotSuspended);
      assert.deepEqual([err.code, err.reason], [Code.FailedPrecondition, "THREAD_NOT_SUSPENDED"]);
      const by: AnsweredBy | undefined = err.answeredBy;
      assert.deepEqual(
        by,
        { requestId: neverMind, revision: suspendedAt, how: "prompt", runRevision: moved.revision, matches: true },
        JSON.stringify(err.metadata),
      );
      return true;
    });
    assert.equal((await client.threads.get(threadId)).revision, moved.revision, "nothing ran");
  });

  test("a request ID reused with another prompt is RequestIdReused naming the original and how it differs", async () => {
    const { threadId, neverMind, moved } = await promptedPastApproval();
    await assert.rejects(client.threads.run(threadId, { text: "delete a.txt", requestId: neverMind }), (err: unknown) => {
      assert.ok(err instanceof RequestIdReused);
      assert.deepEqual([err.code, err.reason], [Code.InvalidArgument, "REQUEST_ID_REUSED"]);
      assert.deepEqual(
        [err.runId, err.revision, err.status, err.differs],
        [moved.result.runId, moved.revision, "completed", ["prompt"]],
        JSON.stringify(err.metadata),
      );
      return true;
    });
    assert.equal((await client.threads.get(threadId)).revision, moved.revision, "nothing ran");
  });

  test("ThreadBusy.isOwn tells the request holding the thread from another", async () => {
    const thread = await client.threads.create();
    const sleepingId = newRequestId();
    const started = await client.threads.startRun(thread.threadId, { text: "sleep 30", requestId: sleepingId });
    try {
      assert.equal(started.status, ThreadRunStatus.RUNNING);
      const own = newRequestId();
      await assert.rejects(client.threads.run(thread.threadId, { text: "hello", requestId: own }), (err: unknown) => {
        assert.ok(err instanceof ThreadBusy);
        assert.deepEqual([err.code, err.reason], [Code.Aborted, "THREAD_BUSY"]);
        assert.deepEqual([err.isOwn(sleepingId), err.isOwn(own), err.runId, err.queueLength], [true, false, started.runId, 0]);
        return true;
      });
    } finally {
      await started.cancel();
      assert.equal((await started.result()).result.status, RunStatus.CANCELLED);
    }
  });
});

describe("the SDK's own handling of thread runs", () => {
  /** A client whose interceptor hands the SDK each of the server's responses through `change`. */
  function tampered(change: (response: AsyncIterable<unknown>) => AsyncIterable<unknown>): ThreadlineClient {
    return createThreadlineClient({
      baseUrl: server.baseUrl,
      token: TOKEN,
      maxEventsPerMessage: 0, // one event per response, so a cut falls between two events
      interceptors: [
        (next) => async (request) => {
          const response = await next(request);
          return response.stream ? { ...response, message: change(response.message) as AsyncIterable<never> } : response;
        },
      ],
    });
  }

  /** A client of a port nobody listens on, and the request ID of every request it sent. */
  async function unreachable(): Promise<{ client: ThreadlineClient; sent: string[] }> {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const address = closed.address();
    assert.ok(address !== null && typeof address === "object");
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const sent: string[] = [];
    const client = createThreadlineClient({
      baseUrl: `127.0.0.1:${address.port}`,
      interceptors: [
        (next) => (request) => {
          const message = request.message as { spec?: { requestId: string } };
          sent.push(request.stream ? "stream" : (message.spec?.requestId ?? ""));
          return next(request);
        },
      ],
    });
    return { client, sent };
  }

  /** Wait until `check` holds, polling; fail after `withinMs` (a bound for a broken server). */
  async function eventually(check: () => Promise<boolean>, what: string, withinMs = 30_000): Promise<void> {
    const until = Date.now() + withinMs;
    while (!(await check())) {
      assert.ok(Date.now() < until, `${what} within ${withinMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  test("a thread stream that ends without its result is a ProtocolError; the run committed", async () => {
    const cut = tampered((received) =>
      (async function* () {
        for await (const message of received) {
          if (isMessage(message, StreamThreadRunResponseSchema) && message.event?.event.case === "result") return;
          yield message;
        }
      })(),
    );
    try {
      const thread = await client.threads.create();
      const stream = cut.threads.stream(thread.threadId, { text: "hello" });
      await assert.rejects(stream.collect(), (err: unknown) => {
        assert.ok(err instanceof ProtocolError);
        assert.equal(err.rawMessage, "the stream ended without its terminal result");
        return true;
      });
      assert.equal(stream.outcome, undefined);
      assert.ok(stream.revision > thread.revision, "the terminal commit was reported before the cut");

      const retried = await client.threads.run(thread.threadId, { text: "hello", requestId: stream.requestId });
      assert.ok(retried.replayed);
      assert.equal(retried.revision, stream.revision);
      assert.equal(output(retried.result), "You said: hello");
    } finally {
      cut.close();
    }
  });

  test("leaving a stream early ends the call, not the run", async () => {
    const thread = await client.threads.create();
    const stream = client.threads.stream(thread.threadId, { text: "lookup threadline" });
    let runId = "";
    for await (const event of stream) {
      assert.equal(event.event.case, "runStarted");
      runId = event.runId;
      break;
    }
    await assert.rejects(stream.collect(), { message: "the stream was closed before its result" });

    await eventually(async () => {
      const now = await client.threads.get(thread.threadId);
      return now.status === ThreadStatus.IDLE && now.revision > thread.revision;
    }, "the run's terminal commit");
    const retried = await client.threads.run(thread.threadId, { text: "lookup threadline", requestId: stream.requestId });
    assert.ok(retried.replayed);
    assert.equal(retried.result.status, RunStatus.COMPLETED);
    assert.equal(retried.result.runId, runId);
    assert.equal(retried.revision, (await client.threads.get(thread.threadId)).revision);
  });

  test("run retries UNAVAILABLE RUN_RETRIES times with one request ID, then throws it", async () => {
    const { client: lost, sent } = await unreachable();
    try {
      const started = Date.now();
      await assert.rejects(lost.threads.run("thread_x", { text: "hello" }), isThreadlineError(Code.Unavailable));
      assert.equal(sent.length, RUN_RETRIES + 1);
      assert.equal(new Set(sent).size, 1, "every attempt carries the same request ID");
      assert.match(sent[0]!, /^req-[0-9a-f]{32}$/);
      assert.ok(Date.now() - started >= 200 + 400 + 800, "200 ms before the first retry, doubling");
    } finally {
      lost.close();
    }
  });

  test("startRun retries UNAVAILABLE RUN_RETRIES times with one request ID, then throws it", async () => {
    const { client: lost, sent } = await unreachable();
    try {
      await assert.rejects(lost.threads.startRun("thread_x", { text: "hello" }), isThreadlineError(Code.Unavailable));
      assert.equal(sent.length, RUN_RETRIES + 1);
      assert.equal(new Set(sent).size, 1, "every attempt carries the same request ID");
      assert.match(sent[0]!, /^req-[0-9a-f]{32}$/);
    } finally {
      lost.close();
    }
  });

  test("run retries only within its deadline", async () => {
    const { client: lost, sent } = await unreachable();
    try {
      await assert.rejects(lost.threads.run("thread_x", { text: "hello", timeoutMs: 500 }), (err: unknown) => {
        assert.ok(err instanceof ThreadlineError);
        assert.ok([Code.Unavailable, Code.DeadlineExceeded].includes(err.code), String(err));
        return true;
      });
      // 0 ms, 200 ms, then the next backoff (400 ms) no longer fits in what is left.
      assert.ok(sent.length >= 1 && sent.length <= 2, `${sent.length} attempts`);
    } finally {
      lost.close();
    }
  });

  test("stream sends its request again RECONNECT_RETRIES times before its first event; reconnect: false never", async () => {
    const { client: lost, sent } = await unreachable();
    try {
      await assert.rejects(lost.threads.stream("thread_x", { text: "hello", reconnect: false }).collect(), isThreadlineError(Code.Unavailable));
      assert.deepEqual(sent, ["stream"]);
      sent.length = 0;
      const started = Date.now();
      await assert.rejects(lost.threads.stream("thread_x", { text: "hello" }).collect(), isThreadlineError(Code.Unavailable));
      assert.deepEqual(sent, Array(RECONNECT_RETRIES + 1).fill("stream"));
      assert.ok(Date.now() - started >= 200 + 400 + 800 + 1600 + 3200, "200 ms before the first retry, doubling");
    } finally {
      lost.close();
    }
  });
});

/**
 * A loopback proxy to `upstream` (`host:port`) whose first connection is cut just as the server
 * starts to answer a call (its first HEADERS frame on a stream): the server ran the call, the
 * client never hears back. Later connections pass through. `seen` has one entry per connection.
 */
async function cuttingProxy(upstream: string): Promise<{ addr: string; seen: string[]; close(): Promise<void> }> {
  const url = new URL(`http://${upstream}`);
  const seen: string[] = [];
  const sockets = new Set<Socket>();
  const proxy: Server = createServer((downstream) => {
    const up = connect(Number(url.port), url.hostname.replace(/^\[|\]$/g, ""));
    for (const socket of [downstream, up]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {}); // the cut, seen from either side
    }
    downstream.pipe(up);
    if (seen.length > 0) {
      seen.push("passed");
      up.pipe(downstream);
      return;
    }
    seen.push("cut");
    // Relay the server's frames (SETTINGS, PING, WINDOW_UPDATE, ...) up to the call's response
    // headers, which are never delivered.
    let buffered = Buffer.alloc(0);
    up.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 9) {
        const length = buffered.readUIntBE(0, 3);
        const kind = buffered[3];
        const streamId = buffered.readUInt32BE(5) & 0x7fffffff;
        if (kind === 0x1 && streamId !== 0) {
          downstream.destroy();
          up.destroy();
          return;
        }
        if (buffered.length < 9 + length) return;
        downstream.write(buffered.subarray(0, 9 + length));
        buffered = buffered.subarray(9 + length);
      }
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const address = proxy.address();
  assert.ok(address !== null && typeof address === "object");
  return {
    addr: `127.0.0.1:${address.port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        proxy.close(() => resolve());
      }),
  };
}

describe("live runs: join, reconnect, watch, attach", () => {
  /** The events of `stream` up to its first tool call. */
  async function untilToolCall(stream: ThreadRunStream): Promise<RunEvent[]> {
    const events: RunEvent[] = [];
    for (;;) {
      const next = await stream.next();
      assert.ok(next.done !== true, `the stream ended before a tool call: ${cases(events).join(" ")}`);
      events.push(next.value);
      if (next.value.event.case === "toolCall") return events;
    }
  }

  test("a finished run joined from its first event yields the events of its stream", async () => {
    const thread = await client.threads.create();
    const { events: streamed, outcome } = await drain(client.threads.stream(thread.threadId, { text: "lookup grpc" }));
    assert.ok(cases(streamed).includes("toolCall"));
    assert.equal(streamed.at(-1)?.event.case, "result");

    const joined = await drain(client.threads.joinRun(thread.threadId, { runId: outcome.result.runId }));
    sameEvents(joined.events, streamed, "join by run ID");
    assert.equal(joined.outcome.revision, outcome.revision);
    assert.equal(joined.outcome.replayed, false);

    // Its request names the same attempt; no name at all, the thread's latest.
    const next = client.threads.stream(thread.threadId, { text: "hello" });
    await drain(next);
    const byRequest = await drain(client.threads.joinRun(thread.threadId, { requestId: next.requestId }));
    const latest = await drain(client.threads.joinRun(thread.threadId));
    sameEvents(byRequest.events, latest.events, "join by request ID vs the latest");
    assert.notEqual(latest.events[0]!.runId, outcome.result.runId);

    await assert.rejects(all(client.threads.joinRun(thread.threadId, { runId: `run-${randomUUID().replaceAll("-", "")}` })), RunNotFound);
    await assert.rejects(all(client.threads.joinRun(freshId("missing"))), ThreadNotFound);
  });

  test("a join after sequence k yields exactly the events after k", async () => {
    const thread = await client.threads.create();
    const { events: streamed, outcome } = await drain(client.threads.stream(thread.threadId, { text: "lookup grpc" }));
    for (const k of [0n, streamed[Math.floor(streamed.length / 2)]!.sequence, streamed.at(-2)!.sequence]) {
      const { events } = await drain(client.threads.joinRun(thread.threadId, { runId: outcome.result.runId, afterSequence: k }));
      sameEvents(
        events,
        streamed.filter((event) => event.sequence > k),
        `after ${k}`,
      );
    }
  });

  test("a stream cut mid-run is resumed with no event lost or repeated", async () => {
    const thread = await client.threads.create();
    const forwarder = await tcpForwarder(new URL(server.baseUrl).host);
    const cut = createThreadlineClient({ baseUrl: forwarder.addr, token: TOKEN, timeoutMs: 30_000, runTimeoutMs: 60_000 });
    try {
      const stream = cut.threads.stream(thread.threadId, { text: "sleep 3" });
      const got = await untilToolCall(stream);
      forwarder.cut(300);
      const rest = await drain(stream);
      got.push(...rest.events);
      assert.ok(forwarder.accepted >= 2, `${forwarder.accepted} connections: the stream did not reconnect`);
      assert.equal(rest.outcome.result.status, RunStatus.COMPLETED);
      // Exactly the uncut stream: what a join from the first event gets once the run ended.
      const uncut = await drain(client.threads.joinRun(thread.threadId, { runId: rest.outcome.result.runId }));
      sameEvents(got, uncut.events, "the resumed stream vs the uncut");

      // A join is resumed the same way.
      const second = cut.threads.stream(thread.threadId, { text: "sleep 3" });
      const first = await untilToolCall(second);
      const joining = cut.threads.joinRun(thread.threadId, { runId: first[0]!.runId });
      const joined = await untilToolCall(joining);
      forwarder.cut(300);
      joined.push(...(await drain(joining)).events);
      first.push(...(await drain(second)).events);
      sameEvents(joined, first, "the resumed join vs the resumed stream");

      // Opted out, the cut ends the stream as before; the run goes on and commits.
      const optedOut = cut.threads.stream(thread.threadId, { text: "sleep 3", reconnect: false });
      const before = await untilToolCall(optedOut);
      forwarder.cut(0);
      await assert.rejects(all(optedOut), (err: unknown) => {
        assert.ok(err instanceof ThreadlineError && err.reason === "", String(err));
        return true;
      });
      const after = await drain(
        client.threads.joinRun(thread.threadId, { runId: optedOut.runId, afterSequence: optedOut.lastSequence! }),
      );
      assert.equal(after.outcome.result.status, RunStatus.COMPLETED);
      // It continues right after the last event the cut stream delivered (the tool's commit may have
      // arrived after its `tool_call`, before the cut).
      assert.ok(optedOut.lastSequence! >= before.at(-1)!.sequence);
      assert.equal(after.events[0]!.sequence, optedOut.lastSequence! + 1n);
    } finally {
      cut.close();
      await forwarder.close();
    }
  });

  test("a watch sees the snapshot, then a run start, commit and end", async () => {
    const thread = await client.threads.create();
    const abort = new AbortController();
    const updates: ThreadUpdate[] = [];
    let wake: () => void = () => {};
    let ended: unknown;
    const watching = (async () => {
      try {
        for await (const update of client.threads.watchThread(thread.threadId, { signal: abort.signal })) {
          updates.push(update);
          wake();
        }
      } catch (err) {
        ended = err;
        wake();
      }
    })();
    const until = async (check: () => boolean, what: string) => {
      const deadline = Date.now() + 20_000;
      while (!check()) {
        assert.ok(ended === undefined, `the watch ended: ${String(ended)}`);
        assert.ok(Date.now() < deadline, `${what} within 20 s`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 100);
        });
      }
    };
    try {
      await until(() => updates.length > 0, "the snapshot");
      assert.deepEqual(updates[0]!.changes, [ThreadChange.SNAPSHOT]);
      assert.equal(updates[0]!.thread?.threadId, thread.threadId);

      const outcome = await client.threads.run(thread.threadId, { text: "hello" });
      await until(() => updates.some((u) => u.changes.includes(ThreadChange.RUN_ENDED)), "RUN_ENDED");
      const at = (kind: ThreadChange) => updates.findIndex((u) => u.changes.includes(kind));
      const [started, committed, ended_] = [at(ThreadChange.RUN_STARTED), at(ThreadChange.COMMITTED), at(ThreadChange.RUN_ENDED)];
      assert.ok(started > 0 && started <= committed && committed <= ended_, `RUN_STARTED ${started}, COMMITTED ${committed}, RUN_ENDED ${ended_}`);
      assert.equal(updates.filter((u) => u.changes.includes(ThreadChange.SNAPSHOT)).length, 1);
      for (let i = 1; i < updates.length; i++) assert.ok(updates[i]!.changeSequence > updates[i - 1]!.changeSequence);
      const last = updates[ended_]!;
      assert.deepEqual([last.thread?.status, last.thread?.revision], [ThreadStatus.IDLE, outcome.revision]);

      // Deleting the thread ends the watch NOT_FOUND.
      await client.threads.delete(thread.threadId);
      await watching;
      assert.ok(ended instanceof ThreadNotFound, String(ended));
    } finally {
      abort.abort();
      await watching;
    }
  });

  test("a retry of a running request attaches from its first event", async () => {
    const thread = await client.threads.create();
    const input = { text: "sleep 3", requestId: newRequestId() };
    const stream = client.threads.stream(thread.threadId, input);
    const first = await untilToolCall(stream);

    // Another caller sends the same request while it runs: it attaches, from sequence 0, and
    // RunThread waits for the same result instead of failing THREAD_BUSY.
    const other = createThreadlineClient({ baseUrl: server.baseUrl, token: TOKEN, timeoutMs: 30_000 });
    try {
      const waited = other.threads.run(thread.threadId, input);
      const attached = await drain(other.threads.stream(thread.threadId, input));
      first.push(...(await drain(stream)).events);
      sameEvents(attached.events, first, "the attached retry vs the first call");
      assert.equal(attached.events[0]!.sequence, 0n);
      assert.equal(attached.outcome.replayed, false);
      const outcome = await waited;
      assert.deepEqual(
        [outcome.replayed, outcome.result.runId, outcome.revision],
        [false, attached.outcome.result.runId, attached.outcome.revision],
      );
    } finally {
      other.close();
    }
    // Once it ended, the same request is a replay, as before.
    assert.ok((await client.threads.run(thread.threadId, input)).replayed);
  });
});

describe("background runs: startRun", () => {
  test("startRun answers RUNNING while the run goes on; result() waits for its end; the same request replays", async () => {
    const thread = await client.threads.create();
    const input = { text: "sleep 3", requestId: newRequestId() };
    const started = await client.threads.startRun(thread.threadId, input);

    assert.deepEqual([started.status, started.replayed, started.outcome], [ThreadRunStatus.RUNNING, false, undefined]);
    assert.match(started.runId, /^run-/);
    assert.deepEqual([started.threadId, started.requestId, started.revision], [thread.threadId, input.requestId, thread.revision]);
    const running = await client.threads.get(thread.threadId);
    assert.equal(running.status, ThreadStatus.RUNNING);
    assert.deepEqual([running.lease?.runId, running.lease?.requestId], [started.runId, input.requestId]);

    const outcome = await started.result();
    assert.equal(outcome.result.status, RunStatus.COMPLETED);
    assert.equal(output(outcome.result), "Tool results: sleep: Slept 3 s.");
    assert.deepEqual([outcome.result.runId, outcome.result.requestId, outcome.replayed], [started.runId, input.requestId, false]);
    assert.equal(outcome.result.state, undefined, "the state is the checkpoint");
    const afterwards = await client.threads.get(thread.threadId);
    assert.deepEqual([afterwards.status, afterwards.revision], [ThreadStatus.IDLE, outcome.revision]);
    assert.ok(outcome.revision > started.revision);

    // The same request again: the stored outcome, nothing ran again.
    const replay = await client.threads.startRun(thread.threadId, input);
    assert.deepEqual(
      [replay.status, replay.replayed, replay.runId, replay.requestId, replay.revision],
      [ThreadRunStatus.COMPLETED, true, started.runId, input.requestId, outcome.revision],
    );
    assert.ok(replay.outcome !== undefined);
    assert.deepEqual([replay.outcome.revision, replay.outcome.replayed], [outcome.revision, true]);
    assert.ok(equals(RunResultSchema, replay.outcome.result, outcome.result), "the same result");
    assert.deepEqual(await replay.result(), replay.outcome);
    assert.equal((await client.threads.get(thread.threadId)).revision, outcome.revision, "nothing ran again");
  });

  test("events() yields the run's events from runStarted to its result, events({ afterSequence }) those after it", async () => {
    const thread = await client.threads.create();
    const started = await client.threads.startRun(thread.threadId, { text: "sleep 1" });

    const { events, outcome } = await drain(started.events());
    assert.deepEqual(
      events.map((event) => event.sequence),
      events.map((_, index) => BigInt(index)),
      "from sequence 0, each once",
    );
    assert.equal(events[0]!.event.case, "runStarted");
    assert.deepEqual(cases(events).slice(-2), ["threadCommitted", "result"]);
    assert.ok(cases(events).includes("toolCall"));
    assert.ok(events.every((event) => event.runId === started.runId));
    assert.deepEqual([outcome.result.runId, outcome.result.status], [started.runId, RunStatus.COMPLETED]);
    assert.deepEqual(await started.result(), outcome);

    for (const k of [0n, events[Math.floor(events.length / 2)]!.sequence, events.at(-2)!.sequence]) {
      const after = await drain(started.events({ afterSequence: k }));
      sameEvents(
        after.events,
        events.filter((event) => event.sequence > k),
        `after ${k}`,
      );
    }
  });

  test("cancel() stops the run: result() is CANCELLED", async () => {
    const thread = await client.threads.create();
    const started = await client.threads.startRun(thread.threadId, { text: "sleep 3" });

    const status = await started.cancel();
    assert.ok([ThreadRunStatus.RUNNING, ThreadRunStatus.CANCELLED].includes(status), ThreadRunStatus[status]);
    const outcome = await started.result();

    assert.equal(outcome.result.status, RunStatus.CANCELLED);
    assert.deepEqual([outcome.result.runId, outcome.replayed], [started.runId, false]);
    const head = await client.threads.checkpoint(thread.threadId, outcome.revision);
    assert.equal(head.kind, CheckpointKind.CANCELLED);
    assert.equal(await started.cancel(), ThreadRunStatus.CANCELLED);
    assert.equal((await client.threads.get(thread.threadId)).status, ThreadStatus.IDLE);
  });

  test("a run known only by its requestId is cancelled by it", async () => {
    const thread = await client.threads.create();
    const requestId = `req-${randomUUID().replaceAll("-", "")}`;
    const started = await client.threads.startRun(thread.threadId, { text: "sleep 3", requestId });

    const status = await client.threads.cancelRequest(thread.threadId, requestId);
    assert.ok([ThreadRunStatus.RUNNING, ThreadRunStatus.CANCELLED].includes(status), ThreadRunStatus[status]);
    const outcome = await started.result();

    assert.deepEqual([outcome.result.status, outcome.result.requestId], [RunStatus.CANCELLED, requestId]);
    assert.equal(await client.threads.cancelRequest(thread.threadId, requestId), ThreadRunStatus.CANCELLED);
    await assert.rejects(
      client.threads.cancelRequest(thread.threadId, `req-${randomUUID().replaceAll("-", "")}`),
      RunNotFound,
    );
  });

  test("startRun on a busy thread is ThreadBusy", async () => {
    const thread = await client.threads.create();
    const started = await client.threads.startRun(thread.threadId, { text: "sleep 3" });
    try {
      await assert.rejects(client.threads.startRun(thread.threadId, { text: "hello" }), (err: unknown) => {
        assert.ok(err instanceof ThreadBusy);
        assert.deepEqual([err.code, err.reason], [Code.Aborted, "THREAD_BUSY"]);
        assert.deepEqual([err.runId, err.requestId], [started.runId, started.requestId]);
        return true;
      });
    } finally {
      await started.cancel();
      assert.equal((await started.result()).result.status, RunStatus.CANCELLED);
    }
  });

  test("result() reads the outcome by a retry of the start when the join cannot tell it", async () => {
    // Every join of this client fails as a join of a log past its retention does.
    const starts: string[] = [];
    const blind = createThreadlineClient({
      baseUrl: server.baseUrl,
      token: TOKEN,
      interceptors: [
        (next) => (request) => {
          if (request.method.name === "JoinThreadRun") {
            const info = { reason: "RUN_EVENTS_EXPIRED", domain: "threadline", metadata: { why: "retention" } };
            throw new ConnectError("the log is gone", Code.FailedPrecondition, undefined, [{ desc: ErrorInfoSchema, value: info }]);
          }
          if (request.method.name === "StartThreadRun") starts.push((request.message as { spec?: { requestId: string } }).spec?.requestId ?? "");
          return next(request);
        },
      ],
    });
    try {
      const thread = await client.threads.create();
      const started = await blind.threads.startRun(thread.threadId, { text: "sleep 1" });
      await assert.rejects(all(started.events()), RunEventsExpired);

      const outcome = await started.result({ timeoutMs: 30_000 });

      assert.equal(outcome.result.status, RunStatus.COMPLETED);
      assert.deepEqual([outcome.result.runId, outcome.replayed], [started.runId, true]);
      assert.equal(outcome.revision, (await client.threads.get(thread.threadId)).revision);
      assert.ok(starts.length >= 2, `${starts.length} starts`);
      assert.deepEqual(new Set(starts), new Set([started.requestId]), "every start is the same request");
    } finally {
      blind.close();
    }
  });
});

describe("busy strategy: enqueue", () => {
  test("an enqueued start waits its turn, then runs", async () => {
    const thread = await client.threads.create();
    const { stream, runId } = await sleeping(thread.threadId);
    let queued;
    let followed: ReturnType<typeof drain> | undefined;
    try {
      queued = await client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "enqueue" });
      assert.deepEqual([queued.status, queued.queuePosition, queued.replayed], [ThreadRunStatus.QUEUED, 1, false]);
      assert.match(queued.runId, /^run-/);
      assert.notEqual(queued.runId, runId);

      const waiting = await client.threads.get(thread.threadId);
      assert.equal(waiting.queue.length, 1, "exactly one request waits");
      const entry = waiting.queue[0]!;
      assert.deepEqual([entry.requestId, entry.runId, entry.kind], [queued.requestId, queued.runId, QueuedRunKind.ENQUEUED]);
      assert.ok(entry.createTime !== undefined, "the entry has its create time");
      assert.deepEqual([waiting.status, waiting.lease?.runId], [ThreadStatus.RUNNING, runId]);
      // A retry of the queued request answers the same; its events wait for its start.
      const again = await client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "enqueue", requestId: queued.requestId });
      assert.deepEqual([again.status, again.queuePosition, again.runId], [ThreadRunStatus.QUEUED, 1, queued.runId]);
      followed = drain(queued.events({ timeoutMs: 30_000 }));
      followed.catch(() => {}); // awaited below; a failure before that is not unhandled

      // A REJECT request is refused while the run holds the thread and one request waits.
      for (const rejected of [
        () => client.threads.run(thread.threadId, { text: "hello" }),
        () => client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "reject" }),
      ]) {
        await assert.rejects(rejected(), (err: unknown) => {
          assert.ok(err instanceof ThreadBusy, String(err));
          assert.deepEqual([err.code, err.reason], [Code.Aborted, "THREAD_BUSY"]);
          assert.deepEqual([err.runId, err.requestId, err.queueLength], [runId, stream.requestId, 1]);
          return true;
        });
      }

      await client.threads.cancel(thread.threadId, runId);
      assert.equal((await stream.collect()).result.status, RunStatus.CANCELLED);
    } finally {
      await stream.close();
    }

    const outcome = await queued.result({ timeoutMs: 30_000 });
    assert.equal(outcome.result.status, RunStatus.COMPLETED);
    assert.deepEqual([outcome.result.runId, outcome.result.requestId, outcome.replayed], [queued.runId, queued.requestId, false]);
    const { events, outcome: seen } = await followed!;
    assert.equal(events[0]?.event.case, "runStarted");
    assert.deepEqual(
      events.map((event) => event.sequence),
      events.map((_, index) => BigInt(index)),
      "from sequence 0, each once",
    );
    assert.ok(events.every((event) => event.runId === queued.runId));
    assert.deepEqual([seen.result.status, seen.revision], [RunStatus.COMPLETED, outcome.revision]);
    const afterwards = await client.threads.get(thread.threadId);
    assert.deepEqual([afterwards.queue, afterwards.status, afterwards.revision], [[], ThreadStatus.IDLE, outcome.revision]);
  });

  test("a full queue is THREAD_QUEUE_FULL, and a queued request is cancelled before it runs", async () => {
    const limit = (await client.getServerInfo()).threadStore?.maxQueuedRuns;
    assert.equal(limit, 16, "the suite's server keeps --max-queued-runs at its default");
    const thread = await client.threads.create();
    const { stream, runId } = await sleeping(thread.threadId);
    const requestIds = Array.from({ length: limit }, (_, i) => `q${String(i).padStart(2, "0")}`);
    const queued = [];
    try {
      for (const [i, requestId] of requestIds.entries()) {
        const started = await client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "enqueue", requestId });
        assert.deepEqual([started.status, started.queuePosition, started.requestId], [ThreadRunStatus.QUEUED, i + 1, requestId]);
        queued.push(started);
      }
      await assert.rejects(
        client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "enqueue", requestId: "q16" }),
        (err: unknown) => {
          assert.ok(err instanceof ThreadQueueFull, String(err));
          assert.deepEqual([err.code, err.reason], [Code.ResourceExhausted, "THREAD_QUEUE_FULL"]);
          assert.deepEqual([err.threadId, err.limit, err.queueLength], [thread.threadId, limit, limit]);
          return true;
        },
      );
      assert.deepEqual(
        (await client.threads.get(thread.threadId)).queue.map((entry) => entry.requestId),
        requestIds,
        "the refused request was not written",
      );

      // The first queued request, cancelled by its request ID: out of the queue at once, never run.
      assert.equal(await client.threads.cancelRequest(thread.threadId, "q00"), ThreadRunStatus.CANCELLED);
      const cancelled = await queued[0]!.result({ timeoutMs: 30_000 });
      assert.deepEqual([cancelled.result.status, cancelled.result.requestId], [RunStatus.CANCELLED, "q00"]);
      const rest = await client.threads.get(thread.threadId);
      assert.equal(rest.queue.length, limit - 1);
      assert.deepEqual(
        rest.queue.map((entry) => entry.requestId),
        requestIds.slice(1),
      );

      await client.threads.cancel(thread.threadId, runId);
      assert.equal((await stream.collect()).result.status, RunStatus.CANCELLED);
    } finally {
      await stream.close();
    }

    const last = await queued.at(-1)!.result({ timeoutMs: 60_000 });
    assert.deepEqual([last.result.status, last.result.requestId, last.result.runId], [RunStatus.COMPLETED, "q15", queued.at(-1)!.runId]);
    const idle = await client.threads.get(thread.threadId);
    assert.deepEqual([idle.status, idle.queue], [ThreadStatus.IDLE, []]);

    // Each request ran once, in acceptance order, after the sleeping one; q00 never ran.
    assert.deepEqual(await requestOrder(thread.threadId), [stream.requestId, ...requestIds.slice(1)]);
  });

  test("run with enqueue waits for its turn", async () => {
    const thread = await client.threads.create();
    const { stream, runId } = await sleeping(thread.threadId);
    const requestId = newRequestId();
    let settled = false;
    const running = client.threads.run(thread.threadId, { text: "hello", busyStrategy: "enqueue", requestId, timeoutMs: 30_000 });
    const done = running.then(
      () => (settled = true),
      () => (settled = true),
    ); // also keeps a failure before the `await` below from being unhandled
    let outcome;
    try {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const { queue } = await client.threads.get(thread.threadId);
        if (queue.some((entry) => entry.requestId === requestId)) break;
        assert.ok(Date.now() < deadline, "the request never showed in the queue");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(settled, false, "run waits while its request is queued");

      await client.threads.cancel(thread.threadId, runId);
      assert.equal((await stream.collect()).result.status, RunStatus.CANCELLED);
      outcome = await running;
    } finally {
      await stream.close();
      await done;
    }
    assert.deepEqual([outcome.result.status, outcome.result.requestId, outcome.replayed], [RunStatus.COMPLETED, requestId, false]);
    assert.deepEqual((await client.threads.get(thread.threadId)).queue, []);
  });

  test("an interrupt stops the running turn and runs ahead of the queue", async () => {
    const thread = await client.threads.create();
    const { stream, runId } = await sleeping(thread.threadId);
    let later, now, interrupted;
    let stopped: ThreadRunOutcome;
    try {
      later = await client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "enqueue", requestId: "later" });
      assert.deepEqual([later.status, later.queuePosition], [ThreadRunStatus.QUEUED, 1]);
      interrupted = Date.now();
      now = await client.threads.startRun(thread.threadId, { text: "hello", busyStrategy: "interrupt", requestId: "now" });
      // Ahead of the enqueued request, while the sleeping run is asked to stop.
      assert.deepEqual([now.status, now.queuePosition, now.replayed], [ThreadRunStatus.QUEUED, 1, false]);
      assert.notEqual(now.runId, runId);

      // Read before the stopped run hands off, the queue is [now, later]; on a fast server "now" may
      // have started already, leaving [later] (the order it ran in is checked on the checkpoints).
      const waiting = await client.threads.get(thread.threadId);
      const expected = [
        ["now", now.runId, QueuedRunKind.INTERRUPTING],
        ["later", later.runId, QueuedRunKind.ENQUEUED],
      ];
      const seen = waiting.queue.map((entry) => [entry.requestId, entry.runId, entry.kind]);
      assert.deepEqual(seen, expected.slice(expected.length - seen.length));
      assert.ok(seen.length >= 1, "the enqueued request waits behind the interrupt");

      // Nothing here cancels it: the interrupt does, well before its 30 s sleep (or the stream's 25 s deadline).
      stopped = await stream.collect();
    } finally {
      await stream.close();
    }
    assert.deepEqual([stopped.result.status, stopped.result.runId], [RunStatus.CANCELLED, runId]);
    const elapsed = Date.now() - interrupted;
    assert.ok(elapsed < 15_000, `the sleeping run stopped ${elapsed} ms after the interrupt`);

    const first = await now.result({ timeoutMs: 30_000 });
    assert.deepEqual([first.result.status, first.result.requestId, first.result.runId], [RunStatus.COMPLETED, "now", now.runId]);
    const second = await later.result({ timeoutMs: 30_000 });
    assert.deepEqual([second.result.status, second.result.requestId, second.result.runId], [RunStatus.COMPLETED, "later", later.runId]);
    assert.ok(first.revision < second.revision, `now at ${first.revision}, later at ${second.revision}`);

    // The cancelled run's progress was committed, then the interrupt ran, then the enqueued request.
    assert.deepEqual(await requestOrder(thread.threadId), [stream.requestId, "now", "later"]);
    const idle = await client.threads.get(thread.threadId);
    assert.deepEqual([idle.status, idle.queue, idle.revision], [ThreadStatus.IDLE, [], second.revision]);
  });

  test("a rollback throws the running turn away and answers again from where it began", async () => {
    const thread = await client.threads.create();
    await client.threads.run(thread.threadId, { text: "hello", requestId: "before" });
    const began = (await client.threads.get(thread.threadId)).revision;
    const { stream, runId } = await sleeping(thread.threadId);
    let redo;
    let stopped: ThreadRunOutcome;
    try {
      redo = await client.threads.startRun(thread.threadId, { text: "lookup grpc", busyStrategy: "rollback", requestId: "redo" });
      assert.deepEqual([redo.status, redo.queuePosition, redo.replayed], [ThreadRunStatus.QUEUED, 1, false]);
      assert.notEqual(redo.runId, runId);
      // Read before the stopped run hands off, the queue is [redo]; on a fast server it may have started.
      const seen = (await client.threads.get(thread.threadId)).queue.map((entry) => [entry.requestId, entry.kind]);
      const expected = [["redo", QueuedRunKind.ROLLING_BACK]];
      assert.deepEqual(seen, expected.slice(expected.length - seen.length));

      // Nothing here cancels it: the rollback does.
      stopped = await stream.collect();
    } finally {
      await stream.close();
    }
    assert.deepEqual([stopped.result.status, stopped.result.runId], [RunStatus.CANCELLED, runId]);
    const outcome = await redo.result({ timeoutMs: 30_000 });
    assert.deepEqual([outcome.result.status, outcome.result.requestId], [RunStatus.COMPLETED, "redo"]);

    // After `began`: the stopped turn's checkpoints (still listed), one ROLLED_BACK copy, then redo's.
    const after = (await all(client.threads.checkpoints(thread.threadId))).reverse().filter((checkpoint) => checkpoint.revision > began);
    const listed = after.map((checkpoint) => `${checkpoint.revision} ${CheckpointKind[checkpoint.kind]} ${checkpoint.requestId}`).join(", ");
    const discarded = after.findIndex((checkpoint) => checkpoint.requestId !== stream.requestId || checkpoint.kind === CheckpointKind.ROLLED_BACK);
    assert.ok(discarded > 0, `the stopped turn's checkpoints stay listed: ${listed}`);
    const copy = after[discarded]!;
    assert.equal(copy.kind, CheckpointKind.ROLLED_BACK, listed);
    assert.equal(copy.revision, after[discarded - 1]!.revision + 1n, listed);
    const redone = after.slice(discarded + 1);
    assert.ok(redone.length > 0, listed);
    assert.ok(redone.every((checkpoint) => checkpoint.requestId === "redo" && checkpoint.kind !== CheckpointKind.ROLLED_BACK), listed);

    // The copy is checkpoint `began` again, its history byte for byte; the head never saw "sleep 30".
    const copied = (await client.threads.checkpoint(thread.threadId, copy.revision)).state?.messageHistory;
    const source = (await client.threads.checkpoint(thread.threadId, began)).state?.messageHistory;
    assert.ok(copied !== undefined && source !== undefined && source.data !== "");
    assert.ok(equals(MessageHistorySchema, copied, source), `copy ${copied.data}\nwant ${source.data}`);
    const history = (await client.threads.get(thread.threadId, { full: true })).head?.state?.messageHistory?.data ?? "";
    assert.ok(history.includes("lookup grpc") && !history.includes("sleep 30"), history);
  });

  test("a rollback with answers undoes an approval and answers the batch again", async () => {
    // "Undo that answer, answer again" (LIVE §4.5): the approved turn is stopped and thrown away, and the
    // same approval is answered again, denied; answers to a running turn without ROLLBACK are refused.
    const thread = await client.threads.create();
    const asked = await client.threads.run(thread.threadId, { text: "delete notes.txt then sleep 30" });
    assert.equal(asked.result.status, RunStatus.SUSPENDED);
    const pending = (await client.threads.get(thread.threadId)).pending;
    assert.ok(pending !== undefined);
    assert.equal(pending.approvals.length, 1);
    const call = pending.approvals[0]!;
    const approved = client.threads.stream(thread.threadId, { answers: answers(approve(call)), timeoutMs: 25_000 });
    let redo;
    let stopped: ThreadRunOutcome;
    try {
      // Read until the sleep tool is called: the delete ran, and the turn sleeps.
      for (;;) {
        const next = await approved.next();
        assert.ok(next.done !== true, "the approved stream ended before the sleep tool was called");
        if (next.value.event.case === "toolCall" && next.value.event.value.toolName === "sleep") break;
      }
      await assert.rejects(
        client.threads.run(thread.threadId, { answers: answers(deny(call)), busyStrategy: "enqueue" }),
        (err: unknown) => {
          assert.ok(err instanceof ThreadNotSuspended);
          assert.deepEqual([err.code, err.reason], [Code.FailedPrecondition, "THREAD_NOT_SUSPENDED"]);
          return true;
        },
      );
      redo = await client.threads.startRun(thread.threadId, { answers: answers(deny(call, "keep it")), busyStrategy: "rollback" });
      assert.deepEqual([redo.status, redo.queuePosition], [ThreadRunStatus.QUEUED, 1]);

      // Nothing here cancels it: the rollback does.
      stopped = await approved.collect();
    } finally {
      await approved.close();
    }
    assert.equal(stopped.result.status, RunStatus.CANCELLED);
    const done = await redo.result({ timeoutMs: 30_000 });
    assert.equal(output(done.result), "Tool results: delete_file: keep it");
    const listed = await all(client.threads.checkpoints(thread.threadId));
    assert.equal(listed.filter((checkpoint) => checkpoint.kind === CheckpointKind.ROLLED_BACK).length, 1);
    const history = (await client.threads.get(thread.threadId, { full: true })).head?.state?.messageHistory?.data ?? "";
    assert.ok(history !== "" && !history.includes("Deleted"), `the approved turn is gone from the head: ${history}`);
  });
});

/**
 * A loopback TCP forwarder to `upstream` (`host:port`) whose connections the test cuts at once:
 * `cut(ms)` closes every open one and refuses new ones (accepts and closes them) for `ms`.
 */
async function tcpForwarder(
  upstream: string,
): Promise<{ addr: string; readonly accepted: number; cut(refuseMs: number): void; close(): Promise<void> }> {
  const url = new URL(`http://${upstream}`);
  const sockets = new Set<Socket>();
  let accepted = 0;
  let refuseUntil = 0;
  const forwarder: Server = createServer((downstream) => {
    accepted++;
    downstream.on("error", () => {});
    if (Date.now() < refuseUntil) {
      downstream.destroy();
      return;
    }
    const up = connect(Number(url.port), url.hostname.replace(/^\[|\]$/g, ""));
    for (const socket of [downstream, up]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {}); // the cut, seen from either side
    }
    downstream.pipe(up);
    up.pipe(downstream);
  });
  await new Promise<void>((resolve) => forwarder.listen(0, "127.0.0.1", resolve));
  const address = forwarder.address();
  assert.ok(address !== null && typeof address === "object");
  const cut = (refuseMs: number) => {
    refuseUntil = Date.now() + refuseMs;
    for (const socket of sockets) socket.destroy();
  };
  return {
    addr: `127.0.0.1:${address.port}`,
    get accepted() {
      return accepted;
    },
    cut,
    close: () =>
      new Promise<void>((resolve) => {
        cut(0);
        forwarder.close(() => resolve());
      }),
  };
}
