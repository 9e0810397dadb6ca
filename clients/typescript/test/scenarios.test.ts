// The shared scenario suite, against a real server: `THREADLINE_ADDR`, or `threadline serve
// --port 0` started here. The server's embedded "default" agent has a scripted model that picks
// its path from the prompt (server/demo.py): `delete <path>` asks for approval, `lookup <topic>`
// calls a plain tool, `count` bumps a capability-state counter, `sleep <s>` waits, and
// `client:<name> {json}` calls the host's client tool; anything else is echoed.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";

import { create, isMessage } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";

import {
  type CheckpointCandidate,
  CheckpointForm,
  Code,
  DEFAULT_MAX_EVENTS_PER_MESSAGE,
  DeferredKind,
  type HarnessState,
  type RunEvent,
  NewStateResponseSchema,
  RunResponseSchema,
  RunSpecSchema,
  RunStatus,
  StreamRunRequestSchema,
  StreamRunResponseSchema,
  SuspendReason,
  type ThreadlineClient,
  ThreadlineError,
  ThreadStatus,
  ToolCategory,
  ToolOutcome,
  approve,
  callResult,
  collectRun,
  createThreadlineClient,
  decodeState,
  deny,
  encodeState,
  pendingCalls,
  resumeWith,
} from "../src/index.js";
import { isProtocolError, isThreadlineError, output, stateOf } from "./checks.js";
import { SERVER_ADDR, startServer } from "./server.js";
import { client, server } from "./suite.js";
import { VECTORS_DIR, checkDeltaVector, checkStateEnvironmentVector, checkVector, manifest, unlistedFiles } from "./vectors.js";

/** The host's own tool: the model calls it with `client:local_time {"zone": "..."}`. */
const LOCAL_TIME = {
  name: "local_time",
  description: "The current local time in a time zone.",
  parametersJsonSchema: JSON.stringify({
    type: "object",
    properties: { zone: { type: "string" } },
    required: ["zone"],
  }),
};

function localTime(args: unknown): string {
  const { zone } = args as { zone: string };
  return `12:34 in ${zone}`;
}

/** What one client sent and received on its `StreamRun` calls, as a Connect interceptor saw it. */
interface StreamRunTrace {
  /** Each request's `max_events_per_message`. */
  readonly requested: number[];
  /** Each request's `spec.checkpoint_form`. */
  readonly forms: CheckpointForm[];
  /** Each call's signal: aborted once the SDK cancelled the call. */
  readonly signals: AbortSignal[];
  /** Each response, in order: the field its events came in and how many. */
  readonly responses: { field: "event" | "events"; count: number }[];
  /** Each checkpoint candidate as it came on the wire, before the SDK rebuilt anything. */
  readonly candidates: { sequence: bigint; data: string; delta?: { keepBytes: bigint; append: string } }[];
}

/**
 * A client of the suite's server whose `StreamRun` calls are traced on the wire.
 *
 * @param tamper - Changes each received event after it is traced, to play a broken server.
 */
function tracedClient(
  maxEventsPerMessage?: number,
  tamper?: (event: RunEvent) => void,
): { traced: ThreadlineClient; trace: StreamRunTrace } {
  const trace: StreamRunTrace = { requested: [], forms: [], signals: [], responses: [], candidates: [] };
  const tracer: Interceptor = (next) => async (request) => {
    if (!request.stream || request.method.name !== "StreamRun") {
      return next(request);
    }
    trace.signals.push(request.signal);
    const sent = request.message;
    const response = await next({
      ...request,
      message: (async function* () {
        for await (const message of sent) {
          if (isMessage(message, StreamRunRequestSchema)) {
            trace.requested.push(message.maxEventsPerMessage);
            trace.forms.push(message.spec?.checkpointForm ?? CheckpointForm.UNSPECIFIED);
          }
          yield message;
        }
      })(),
    });
    if (!response.stream) {
      return response;
    }
    const received = response.message;
    return {
      ...response,
      message: (async function* () {
        for await (const message of received) {
          if (isMessage(message, StreamRunResponseSchema)) {
            const packed = message.event === undefined;
            trace.responses.push({ field: packed ? "events" : "event", count: packed ? message.events.length : 1 });
            for (const event of message.event === undefined ? message.events : [message.event]) {
              if (event.event.case === "checkpointCandidate") {
                const { state, historyDelta } = event.event.value;
                trace.candidates.push({
                  sequence: event.sequence,
                  data: state?.messageHistory?.data ?? "",
                  ...(historyDelta && { delta: { keepBytes: historyDelta.keepBytes, append: historyDelta.append } }),
                });
              }
              tamper?.(event);
            }
          }
          yield message;
        }
      })(),
    };
  };
  const traced = createThreadlineClient({
    baseUrl: server.baseUrl,
    token: process.env["THREADLINE_TOKEN"],
    interceptors: [tracer],
    ...(maxEventsPerMessage === undefined ? {} : { maxEventsPerMessage }),
  });
  return { traced, trace };
}

/** Check a whole stream: sequence numbers 0, 1, 2, … and exactly one result, last. */
function assertWholeStream(events: RunEvent[]): void {
  assert.deepEqual(
    events.map((e) => e.sequence),
    events.map((_, i) => BigInt(i)),
  );
  assert.equal(events.at(-1)?.event.case, "result");
  assert.equal(events.filter((e) => e.event.case === "result").length, 1);
}

describe("threads", () => {
  test("the server describes itself and its demo agent", async () => {
    const info = await client.getServerInfo();
    assert.ok(info.schemaVersions.includes("1"));
    assert.equal(info.defaultAgent, "default");
    const agent = info.agents.find((a) => a.name === info.defaultAgent);
    assert.ok(agent);
    assert.equal(agent.tools.find((t) => t.name === "delete_file")?.category, ToolCategory.REQUIRES_APPROVAL);
  });

  test("a thread continues twice: same thread ID, a new run ID each time, growing history", async () => {
    const first = await client.run({ prompt: "hello" });
    assert.equal(output(first), "You said: hello");
    const second = await client.run({ prompt: "hello again", previousState: stateOf(first) });
    assert.equal(output(second), "You said: hello again");
    const third = await client.run({ prompt: "and again", previousState: stateOf(second) });
    assert.equal(output(third), "You said: and again");

    assert.match(first.threadId, /^thread_[0-9a-f]{32}$/);
    for (const result of [first, second, third]) {
      assert.equal(result.threadId, first.threadId);
      assert.equal(stateOf(result).threadId, first.threadId);
      assert.match(result.runId, /^run-[0-9a-f]{32}$/);
    }
    assert.equal(new Set([first.runId, second.runId, third.runId]).size, 3);
    const counts = [first, second, third].map((r) => stateOf(r).messageHistory?.messageCount);
    assert.deepEqual(counts, [2n, 4n, 6n]);
    // The history is returned byte for byte: the earlier history is a prefix of the later one.
    const before = JSON.parse(stateOf(first).messageHistory!.data) as unknown[];
    const later = JSON.parse(stateOf(third).messageHistory!.data) as unknown[];
    assert.deepEqual(later.slice(0, before.length), before);
  });

  test("a thread continues from a state stored as bytes or as JSON", async () => {
    const first = await client.run({ prompt: "remember me" });
    const fromBytes = decodeState(encodeState(stateOf(first)));
    const fromJson = decodeState(encodeState(stateOf(first), "json"));
    assert.deepEqual(fromJson, fromBytes);
    const next = await client.run({ prompt: "still here", previousState: fromJson });
    assert.equal(next.threadId, first.threadId);
    assert.equal(output(next), "You said: still here");
  });

  test("a fork gets a new thread ID and the same history", async () => {
    const source = stateOf(await client.run({ prompt: "lookup grpc" }));
    const fork = await client.forkState(source);
    assert.notEqual(fork.threadId, source.threadId);
    assert.match(fork.threadId, /^thread_[0-9a-f]{32}$/);
    assert.deepEqual(fork.messageHistory, source.messageHistory);
    assert.deepEqual(fork.capabilityStates, source.capabilityStates);

    const named = await client.forkState(source, { threadId: "thr_forkednamed1" });
    assert.equal(named.threadId, "thr_forkednamed1");
    assert.deepEqual(named.messageHistory, source.messageHistory);

    const continued = await client.run({ prompt: "hello fork", previousState: fork });
    assert.equal(continued.threadId, fork.threadId);
    assert.equal(output(continued), "You said: hello fork");

    await assert.rejects(
      client.forkState(source, { threadId: source.threadId }),
      isThreadlineError(Code.InvalidArgument, "FORK_THREAD_ID_CONFLICT"),
    );
  });

  test("capability state travels in the envelope from run to run", async () => {
    const first = await client.run({ prompt: "count" });
    const second = await client.run({ prompt: "count", previousState: stateOf(first) });
    assert.match(String(output(second)), /count: 2/);
    const counter = stateOf(second).capabilityStates.find((s) => s.capabilityId === "demo.counter");
    assert.deepEqual(JSON.parse(counter?.dataJson ?? "null"), { value: 2 });
  });
});

describe("deferred tool calls", () => {
  test("an approval suspends the run; approving it completes the run", async () => {
    const suspended = await client.run({ prompt: "delete a.txt" });
    assert.equal(suspended.status, RunStatus.SUSPENDED);
    assert.equal(suspended.suspendReason, SuspendReason.DEFERRED);
    assert.ok(suspended.deferred);
    assert.equal(suspended.deferred.calls.length, 0);
    const [pending] = pendingCalls(suspended.deferred);
    assert.ok(pending);
    assert.equal(pending.call.toolName, "delete_file");
    assert.equal(pending.call.kind, DeferredKind.APPROVAL);
    assert.deepEqual(pending.args, { path: "a.txt" });

    const resume = resumeWith(suspended.deferred, [approve(pending.call, { answeredBy: "ts-suite" })]);
    const done = await client.run({ previousState: stateOf(suspended), deferredResume: resume });
    assert.equal(done.threadId, suspended.threadId);
    assert.notEqual(done.runId, suspended.runId);
    assert.match(String(output(done)), /Deleted a\.txt\./);
  });

  test("a denial reaches the model with the host's message", async () => {
    const suspended = await client.run({ prompt: "delete secrets.txt" });
    assert.equal(suspended.status, RunStatus.SUSPENDED);
    const call = suspended.deferred?.approvals[0];
    assert.ok(call);
    const { events, result } = await collectRun(
      client.streamRun({
        previousState: stateOf(suspended),
        deferredResume: resumeWith(suspended.deferred!, [deny(call, "not today")]),
      }),
    );
    const text = String(output(result));
    assert.match(text, /not today/);
    assert.doesNotMatch(text, /Deleted/);
    const denied = events.flatMap((e) => (e.event.case === "toolResult" ? [e.event.value] : []));
    assert.ok(
      denied.some((r) => r.toolCallId === call.toolCallId && r.outcome === ToolOutcome.DENIED),
      "the stream shows the call as denied",
    );
  });

  test("a client tool is executed by the host and the run completes", async () => {
    const clientTools = [LOCAL_TIME];
    const suspended = await client.run({ prompt: 'client:local_time {"zone": "UTC"}', clientTools });
    assert.equal(suspended.status, RunStatus.SUSPENDED);
    assert.ok(suspended.deferred);
    assert.equal(suspended.deferred.approvals.length, 0);
    const [pending] = pendingCalls(suspended.deferred);
    assert.ok(pending);
    assert.equal(pending.call.kind, DeferredKind.EXTERNAL);
    assert.equal(pending.call.toolName, "local_time");
    assert.equal(pending.call.targetIdentity, "tool/threadline.client/local_time");
    assert.deepEqual(pending.args, { zone: "UTC" });

    const answer = callResult(pending.call, localTime(pending.args));
    const done = await client.run({
      previousState: stateOf(suspended),
      deferredResume: resumeWith(suspended.deferred, [answer]),
      clientTools,
    });
    assert.match(String(output(done)), /local_time: 12:34 in UTC/);
  });

  test("remainingDeferred reports what a checkpoint's history has not yet answered", async () => {
    const suspended = await client.run({ prompt: "delete b.txt" });
    const resume = resumeWith(suspended.deferred!, [approve(suspended.deferred!.approvals[0]!)]);
    const remaining = await client.remainingDeferred(resume, stateOf(suspended));
    assert.ok(remaining);
    assert.equal(remaining.requests?.approvals.length, 1);
    const done = await client.run({ previousState: stateOf(suspended), deferredResume: resume });
    assert.equal(await client.remainingDeferred(resume, stateOf(done)), undefined);
  });
});

describe("streaming", () => {
  test("events are in order, gap-free, and checkpoint candidates come before the result", async () => {
    const { events, result } = await collectRun(client.streamRun({ prompt: "lookup grpc", checkpoints: true }));
    assert.deepEqual(
      events.map((e) => e.sequence),
      events.map((_, i) => BigInt(i)),
    );
    assert.equal(events[0]?.event.case, "runStarted");
    assert.equal(events.at(-1)?.event.case, "result");
    assert.equal(events.filter((e) => e.event.case === "result").length, 1);
    for (const event of events) {
      assert.equal(event.threadId, result.threadId);
      assert.equal(event.runId, result.runId);
    }
    assert.match(String(output(result)), /gRPC is a remote procedure call framework/);

    const candidates = events.flatMap((e, i) => (e.event.case === "checkpointCandidate" ? [{ i, e: e.event.value }] : []));
    // One after each model_request_started and model_request_completed; this run makes two requests.
    assert.equal(candidates.length, 4);
    const resultIndex = events.length - 1;
    for (const { i, e } of candidates) {
      assert.ok(i < resultIndex);
      assert.equal(e.state?.threadId, result.threadId);
      const previous = events[i - 1]?.event;
      assert.ok(previous?.case === "lifecycle" && /^model_request_(started|completed)$/.test(previous.value.type));
    }
    // A candidate is a state a host may continue from.
    const last = candidates.at(-1)!.e.state!;
    assert.equal((await client.validateState(last)).state.threadId, result.threadId);
  });

  test("aborting a stream cancels it with Code.Canceled", async () => {
    const controller = new AbortController();
    const seen: RunEvent[] = [];
    await assert.rejects(
      (async () => {
        for await (const event of client.streamRun({ prompt: "sleep 30" }, { signal: controller.signal })) {
          seen.push(event);
          if (event.event.case === "runStarted") controller.abort();
        }
      })(),
      isThreadlineError(Code.Canceled),
    );
    assert.equal(seen[0]?.event.case, "runStarted");
  });

  test("leaving the loop early cancels the call", async () => {
    const signals: AbortSignal[] = [];
    const observed = createThreadlineClient({
      baseUrl: server.baseUrl,
      token: process.env["THREADLINE_TOKEN"],
      interceptors: [
        (next) => (request) => {
          signals.push(request.signal);
          return next(request);
        },
      ],
    });
    try {
      for await (const event of observed.streamRun({ prompt: "sleep 30" })) {
        assert.equal(event.event.case, "runStarted");
        break;
      }
      assert.equal(signals.length, 1);
      assert.equal(signals[0]?.aborted, true);
      // The connection stays usable.
      assert.equal(output(await observed.run({ prompt: "after the break" })), "You said: after the break");
    } finally {
      observed.close();
    }
  });

  test("a call deadline ends a slow run with Code.DeadlineExceeded", async () => {
    await assert.rejects(client.run({ prompt: "sleep 30" }, { timeoutMs: 300 }), isThreadlineError(Code.DeadlineExceeded));
  });
});

describe("packed events", () => {
  /** The demo agent echoes this as "You said: " + it, in 8-character text deltas: about 2,000 events. */
  const LONG_PROMPT = "x".repeat(16_000);
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  test("every streamRun sends maxEventsPerMessage: DEFAULT_MAX_EVENTS_PER_MESSAGE, else the client's", async () => {
    assert.equal(DEFAULT_MAX_EVENTS_PER_MESSAGE, 64);
    for (const [configured, sent] of [
      [undefined, 64],
      [0, 0],
      [7, 7],
      [1000, 1000],
    ] as const) {
      const { traced, trace } = tracedClient(configured);
      try {
        for (const prompt of ["hello", "lookup grpc"]) {
          assertWholeStream((await collectRun(traced.streamRun({ prompt }))).events);
        }
        assert.deepEqual(trace.requested, [sent, sent], `maxEventsPerMessage: ${configured}`);
        // The server takes at most 256, and 0 means one event per response, in `event`.
        const most = sent === 0 ? 1 : Math.min(sent, 256);
        assert.ok(trace.responses.every((r) => r.count <= most && r.field === (sent > 1 ? "events" : "event")));
      } finally {
        traced.close();
      }
    }
  });

  test("packed responses give the host the same events as one event per response", async () => {
    const runs = [];
    for (const maxEventsPerMessage of [undefined, 0]) {
      const { traced, trace } = tracedClient(maxEventsPerMessage);
      try {
        const { events, result } = await collectRun(traced.streamRun({ prompt: "lookup grpc", checkpoints: true }));
        assertWholeStream(events);
        assert.match(String(output(result)), /gRPC is a remote procedure call framework/);
        runs.push({ events, trace });
      } finally {
        traced.close();
      }
    }
    const [packed, single] = runs;
    assert.ok(packed && single);
    assert.deepEqual(
      packed.events.map((e) => e.event.case),
      single.events.map((e) => e.event.case),
    );
    // Both wire forms were really used: `events` when packing is on, `event` when it is off.
    assert.ok(packed.trace.responses.every((r) => r.field === "events" && r.count >= 1));
    assert.equal(
      packed.trace.responses.reduce((sum, r) => sum + r.count, 0),
      packed.events.length,
    );
    assert.ok(single.trace.responses.every((r) => r.field === "event"));
    assert.equal(single.trace.responses.length, single.events.length);
  });

  test("a paused reader gets every event of a long echo, in order", async (t) => {
    const { traced, trace } = tracedClient();
    try {
      const stream = traced.streamRun({ prompt: LONG_PROMPT })[Symbol.asyncIterator]();
      const events: RunEvent[] = [];
      const first = await stream.next();
      assert.equal(first.done, false);
      events.push(first.value!);
      // Meanwhile the server runs ahead as far as HTTP/2 flow control lets it, and packs the
      // events that wait for the stream.
      await sleep(1_000);
      for (let next = await stream.next(); next.done !== true; next = await stream.next()) {
        events.push(next.value);
      }
      assertWholeStream(events);
      // The text part's first chunk comes in its `partStart`, the rest in `partDelta`s.
      const text = events.map(({ event }) =>
        event.case === "partStart" ? event.value.content : event.case === "partDelta" ? event.value.contentDelta : "",
      );
      assert.equal(text.join(""), `You said: ${LONG_PROMPT}`);
      const last = events.at(-1)?.event;
      assert.ok(last?.case === "result");
      assert.equal(output(last.value), `You said: ${LONG_PROMPT}`);
      assert.ok(trace.responses.every((r) => r.count >= 1 && r.count <= DEFAULT_MAX_EVENTS_PER_MESSAGE));
      // How much was packed depends on how far flow control let the server run ahead.
      const most = Math.max(...trace.responses.map((r) => r.count));
      t.diagnostic(`${events.length} events in ${trace.responses.length} responses, at most ${most} in one`);
    } finally {
      traced.close();
    }
  });

  test("after an abort no more events arrive, packed or not", async () => {
    for (const maxEventsPerMessage of [undefined, 0]) {
      const { traced } = tracedClient(maxEventsPerMessage);
      const controller = new AbortController();
      const seen: RunEvent[] = [];
      try {
        await assert.rejects(
          (async () => {
            for await (const event of traced.streamRun({ prompt: LONG_PROMPT }, { signal: controller.signal })) {
              seen.push(event);
              if (seen.length === 1) {
                await sleep(300); // events pile up: packed on the server, buffered in the client
              } else {
                controller.abort();
              }
            }
          })(),
          isThreadlineError(Code.Canceled),
        );
        assert.equal(seen.length, 2, `maxEventsPerMessage: ${maxEventsPerMessage}`);
      } finally {
        traced.close();
      }
    }
  });
});

describe("checkpoint candidates", () => {
  /** The checkpoint candidates among `events`, in order. */
  function candidatesOf(events: RunEvent[]): { sequence: bigint; candidate: CheckpointCandidate }[] {
    return events.flatMap(({ sequence, event }) =>
      event.case === "checkpointCandidate" ? [{ sequence, candidate: event.value }] : [],
    );
  }

  /**
   * Check that a candidate the host got holds a complete state: its history hashes to its
   * `sha256` and holds `message_count` messages, and the server accepts the state as it is.
   */
  async function assertComplete(candidate: CheckpointCandidate): Promise<HarnessState> {
    const state = candidate.state;
    assert.ok(state?.messageHistory);
    const { data, sha256, messageCount } = state.messageHistory;
    assert.ok(createHash("sha256").update(data, "utf8").digest().equals(sha256), "the history matches its sha256");
    assert.equal(BigInt((JSON.parse(data) as unknown[]).length), messageCount);
    const validated = await client.validateState(state);
    assert.equal(validated.state.messageHistory?.data, data);
    return state;
  }

  const utf8Length = (text: string) => Buffer.byteLength(text, "utf8");

  test("with checkpoints, streamRun asks for CHECKPOINT_FORM_DELTA and yields complete states", async () => {
    const { traced, trace } = tracedClient();
    try {
      const spec = { prompt: "lookup grpc", checkpoints: true };
      const { events, result } = await collectRun(traced.streamRun(spec));
      assertWholeStream(events);
      assert.match(String(output(result)), /gRPC is a remote procedure call framework/);
      // The request asked for deltas; the host's spec object is as it was.
      assert.deepEqual(trace.forms, [CheckpointForm.DELTA]);
      assert.deepEqual(spec, { prompt: "lookup grpc", checkpoints: true });

      // On the wire every candidate's history came as a delta, the first on `[]` (no previous state).
      assert.equal(trace.candidates.length, 4);
      assert.ok(trace.candidates.every((c) => c.data === "" && c.delta !== undefined));
      assert.ok(trace.candidates[0]!.delta!.keepBytes <= 2n);
      // The host got every one of them whole, delta still attached.
      const candidates = candidatesOf(events);
      assert.deepEqual(
        candidates.map((c) => c.sequence),
        trace.candidates.map((c) => c.sequence),
      );
      const states: HarnessState[] = [];
      for (const { candidate } of candidates) {
        assert.ok(candidate.historyDelta);
        states.push(await assertComplete(candidate));
      }
      // Each delta carried only what its history added to the one before.
      for (const [i, c] of trace.candidates.entries()) {
        const before = i === 0 ? "[]" : states[i - 1]!.messageHistory!.data;
        const data = states[i]!.messageHistory!.data;
        assert.equal(Number(c.delta!.keepBytes) + utf8Length(c.delta!.append), utf8Length(data));
        assert.ok(utf8Length(c.delta!.append) <= utf8Length(data) - utf8Length(before) + 1);
      }

      // A candidate continues the thread like a result's state.
      const last = states.at(-1)!;
      const next = await traced.run({ prompt: "hello again", previousState: last });
      assert.equal(next.threadId, result.threadId);
      assert.equal(output(next), "You said: hello again");
      assert.equal(stateOf(next).messageHistory?.messageCount, last.messageHistory!.messageCount + 2n);

      // A spec given as a `RunSpec` message is not changed either.
      const message = create(RunSpecSchema, { prompt: { case: "text", value: "hello" }, checkpoints: true });
      assertWholeStream((await collectRun(traced.streamRun(message))).events);
      assert.equal(message.checkpointForm, CheckpointForm.UNSPECIFIED);
      assert.deepEqual(trace.forms, [CheckpointForm.DELTA, CheckpointForm.DELTA]);
    } finally {
      traced.close();
    }
  });

  test("a continued thread's first candidate is rebuilt from the previous state's history", async () => {
    const previous = stateOf(await client.run({ prompt: "count" }));
    const { traced, trace } = tracedClient();
    try {
      const { events, result } = await collectRun(
        traced.streamRun({ prompt: "count", previousState: previous, checkpoints: true }),
      );
      assertWholeStream(events);
      assert.equal(result.threadId, previous.threadId);
      assert.deepEqual(trace.forms, [CheckpointForm.DELTA]);
      const first = trace.candidates[0];
      assert.ok(first?.delta);
      assert.equal(first.data, "");
      // The first delta edits the previous history, which is far more than `[]`.
      const before = Buffer.from(previous.messageHistory!.data, "utf8");
      const keep = Number(first.delta.keepBytes);
      assert.ok(keep > 2 && keep <= before.length, `keep_bytes ${keep} of ${before.length}`);

      const candidates = candidatesOf(events);
      const states: HarnessState[] = [];
      for (const { candidate } of candidates) states.push(await assertComplete(candidate));
      const rebuilt = states[0]!.messageHistory!.data;
      assert.deepEqual(Buffer.from(rebuilt, "utf8").subarray(0, keep), before.subarray(0, keep));
      const earlier = JSON.parse(previous.messageHistory!.data) as unknown[];
      assert.deepEqual((JSON.parse(rebuilt) as unknown[]).slice(0, earlier.length), earlier);
      // Everything but the history came whole too: the counter the previous run left at 1.
      assert.deepEqual(
        states[0]!.capabilityStates.map((c) => [c.capabilityId, JSON.parse(c.dataJson)]),
        previous.capabilityStates.map((c) => [c.capabilityId, JSON.parse(c.dataJson)]),
      );

      // The last candidate continues the thread.
      const next = await traced.run({ prompt: "hello again", previousState: states.at(-1)! });
      assert.equal(next.threadId, previous.threadId);
      assert.equal(output(next), "You said: hello again");
    } finally {
      traced.close();
    }
  });

  test("an explicit checkpointForm is sent as given", async () => {
    const { traced, trace } = tracedClient();
    try {
      for (const checkpointForm of [CheckpointForm.FULL, CheckpointForm.DELTA]) {
        const before = trace.candidates.length;
        const spec = { prompt: "lookup grpc", checkpoints: true, checkpointForm };
        const { events } = await collectRun(traced.streamRun(spec));
        assertWholeStream(events);
        assert.equal(trace.forms.at(-1), checkpointForm);
        const wire = trace.candidates.slice(before);
        const candidates = candidatesOf(events);
        assert.equal(wire.length, 4);
        assert.equal(candidates.length, 4);
        for (const [i, { candidate }] of candidates.entries()) {
          const state = await assertComplete(candidate);
          if (checkpointForm === CheckpointForm.FULL) {
            // Whole on the wire, and handed over as it came.
            assert.equal(wire[i]!.delta, undefined);
            assert.equal(candidate.historyDelta, undefined);
            assert.equal(wire[i]!.data, state.messageHistory!.data);
          } else {
            assert.equal(wire[i]!.data, "");
            assert.ok(candidate.historyDelta);
          }
        }
      }
      // Without checkpoints the form is left unset.
      assertWholeStream((await collectRun(traced.streamRun({ prompt: "hello" }))).events);
      assert.equal(trace.forms.at(-1), CheckpointForm.UNSPECIFIED);
      assert.equal(trace.forms.length, 3);
    } finally {
      traced.close();
    }
  });

  test("a candidate that does not rebuild ends the stream with a ProtocolError, naming its sequence", async () => {
    // Each breakage, played on the second candidate, and the end of the error it must give.
    const breakages: [string, (candidate: CheckpointCandidate) => void][] = [
      [
        "its rebuilt history does not match message_history\\.sha256",
        (c) => void (c.state!.messageHistory!.sha256[0]! ^= 1),
      ],
      [
        "its history_delta keeps \\d+ bytes of a base that has \\d+",
        (c) => void (c.historyDelta!.keepBytes += 1_000_000n),
      ],
    ];
    for (const [why, breakage] of breakages) {
      let seen = 0;
      let broken: bigint | undefined;
      const { traced, trace } = tracedClient(undefined, (event) => {
        if (event.event.case === "checkpointCandidate" && ++seen === 2) {
          broken = event.sequence;
          breakage(event.event.value);
        }
      });
      const events: RunEvent[] = [];
      try {
        await assert.rejects(
          (async () => {
            for await (const event of traced.streamRun({ prompt: "lookup grpc", checkpoints: true })) {
              events.push(event);
            }
          })(),
          (err: unknown) =>
            isProtocolError(new RegExp(`^the checkpoint candidate at sequence ${broken} does not rebuild: ${why}$`))(err),
        );
        // The host got every event before the broken candidate, and not that one; the run was cancelled.
        assert.ok(broken !== undefined);
        assert.equal(events.at(-1)?.sequence, broken - 1n);
        assert.equal(candidatesOf(events).length, 1);
        assert.equal(trace.signals.length, 1);
        assert.equal(trace.signals[0]?.aborted, true);
      } finally {
        traced.close();
      }
    }
  });
});

describe("errors", () => {
  /** A client whose interceptor hands the SDK each of the server's responses through `change`. */
  function tampered(change: (response: AsyncIterable<unknown> | object) => AsyncIterable<unknown> | object) {
    return createThreadlineClient({
      baseUrl: server.baseUrl,
      token: process.env["THREADLINE_TOKEN"],
      maxEventsPerMessage: 0, // one event per response, so a cut falls between two events
      interceptors: [
        (next) => async (request) => {
          const response = await next(request);
          return response.stream
            ? { ...response, message: change(response.message) as AsyncIterable<never> }
            : { ...response, message: change(response.message) as never };
        },
      ],
    });
  }

  test("a stream that ends without its result is a ProtocolError", async () => {
    // The real server's stream, ended before the response that carries the result (as a proxy
    // cutting the call cleanly would).
    const cut = tampered((received) =>
      (async function* () {
        for await (const message of received as AsyncIterable<unknown>) {
          if (isMessage(message, StreamRunResponseSchema) && message.event?.event.case === "result") {
            return;
          }
          yield message;
        }
      })(),
    );
    const seen: string[] = [];
    try {
      await assert.rejects(
        (async () => {
          for await (const event of cut.streamRun({ prompt: "lookup grpc" })) {
            seen.push(event.event.case ?? "");
          }
        })(),
        isProtocolError("the stream ended without its terminal result"),
      );
      assert.equal(seen[0], "runStarted");
      assert.ok(seen.includes("toolResult") && !seen.includes("result"));
      await assert.rejects(collectRun(cut.streamRun({ prompt: "hello" })), isProtocolError("the stream ended without its terminal result"));
    } finally {
      cut.close();
    }
  });

  test("a response without a field the contract requires is a ProtocolError", async () => {
    const stripped = tampered((message) => {
      if (isMessage(message, RunResponseSchema)) message.result = undefined;
      if (isMessage(message, NewStateResponseSchema)) message.state = undefined;
      return message;
    });
    try {
      await assert.rejects(stripped.run({ prompt: "hello" }), isProtocolError("the server's response has no RunResponse.result"));
      await assert.rejects(stripped.newState(), isProtocolError("the server's response has no NewStateResponse.state"));
    } finally {
      stripped.close();
    }
  });

  test("a state with an unsupported schema_version is rejected with SCHEMA_VERSION_UNSUPPORTED", async () => {
    const state = stateOf(await client.run({ prompt: "hello" }));
    const future = { ...state, schemaVersion: "999" };
    const check = (field: string) => (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.code, Code.FailedPrecondition);
      assert.equal(err.reason, "SCHEMA_VERSION_UNSUPPORTED");
      assert.equal(err.domain, "threadline");
      assert.equal(err.metadata["received"], "999");
      assert.equal(err.metadata["supported"], "1");
      assert.ok(err.fieldViolations.some((v) => v.field === field));
      return true;
    };
    await assert.rejects(client.validateState(future), check("state.schema_version"));
    await assert.rejects(
      client.run({ prompt: "hello", previousState: future }),
      check("spec.previous_state.schema_version"),
    );
    await assert.rejects(
      collectRun(client.streamRun({ prompt: "hello", previousState: future })),
      check("spec.previous_state.schema_version"),
    );
  });

  test("an unknown agent is rejected with AGENT_UNKNOWN", async () => {
    await assert.rejects(client.run({ agent: "no-such-agent", prompt: "hi" }), isThreadlineError(Code.InvalidArgument, "AGENT_UNKNOWN"));
  });

  test("a server with --token needs the client's token", { skip: SERVER_ADDR && "THREADLINE_ADDR names the server" }, async () => {
    const guarded = await startServer(["--token", "s3cret-token"]);
    const clients = ["", "wrong", "s3cret-token"].map((token) => createThreadlineClient({ baseUrl: guarded.baseUrl, token }));
    try {
      const [missing, wrong, right] = clients;
      for (const [c, reason] of [
        [missing!, "TOKEN_MISSING"],
        [wrong!, "TOKEN_INVALID"],
      ] as const) {
        await assert.rejects(c.getServerInfo(), isThreadlineError(Code.Unauthenticated, reason));
      }
      assert.ok((await right!.getServerInfo()).schemaVersions.includes("1"));
      const events = [];
      for await (const event of right!.streamRun({ prompt: "hello token" })) events.push(event);
      assert.equal(events.at(-1)?.event.case, "result");
    } finally {
      for (const c of clients) c.close();
      await guarded.stop();
    }
  });

  test("validateState returns the state in both stored forms", async () => {
    const created = await client.newState({ threadId: "thr_validated1" });
    assert.equal(created.schemaVersion, "1");
    assert.equal(created.messageHistory?.data, "[]");
    const validated = await client.validateState(created);
    assert.deepEqual(encodeState(validated.state), encodeState(created));
    const again = await client.validateState({ stateJson: validated.stateJson });
    assert.deepEqual(encodeState(again.state), encodeState(created));
    assert.equal(again.stateJson, validated.stateJson);
  });
});

describe("example host", () => {
  const PACKAGE_DIR = new URL("..", import.meta.url);

  const HOST = fileURLToPath(new URL("examples/host.ts", PACKAGE_DIR));
  // Resolved here, so the host also starts in a directory of its own (`cwd`).
  const TSX = import.meta.resolve("tsx");

  /** Run examples/host.ts with `input` on stdin; resolve with its exit code and output. */
  function host(
    args: string[],
    input: string,
    cwd: string | URL = PACKAGE_DIR,
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", TSX, HOST, "--addr", server.baseUrl, ...args], {
        cwd,
        stdio: ["pipe", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });
  }

  test("keeps the thread in a file, asks for approvals and runs its own client tool", async () => {
    const dir = mkdtempSync(join(tmpdir(), "threadline-host-"));
    const file = join(dir, "thread.json");
    try {
      const first = await host(["--state", file, "delete notes.txt"], "y\n");
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /Allow delete_file/);
      assert.match(first.stdout, /done: Tool results: delete_file: Deleted notes\.txt\./);
      const stored = JSON.parse(readFileSync(file, "utf8")) as { state: { thread_id: string }; pending?: unknown };
      assert.equal(stored.pending, undefined);

      const second = await host(["--state", file, "delete b.txt"], "not this one\n");
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /done: Tool results: delete_file: not this one/);

      const third = await host(["--state", file, 'client:local_time {"zone": "UTC"}'], "");
      assert.equal(third.code, 0, third.stderr);
      assert.match(third.stdout, /done: Tool results: local_time: \d{1,2}:\d\d:\d\d UTC/);

      const after = JSON.parse(readFileSync(file, "utf8")) as { state: unknown };
      const state = decodeState(JSON.stringify(after.state));
      assert.equal(state.threadId, stored.state.thread_id);
      assert.equal(state.messageHistory?.messageCount, 12n);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("--agent demo-lead runs the Host-managed child here, asks for its approval, and answers the parent", async () => {
    const dir = mkdtempSync(join(tmpdir(), "threadline-host-"));
    const file = join(dir, "lead.json");
    try {
      const led = await host(["--state", file, "--agent", "demo-lead", "ask-child delete old.txt"], "y\n");
      assert.equal(led.code, 0, led.stderr);
      const started = /⇢ child reviewer \(agent demo-reviewer, (thread_[0-9a-f]{32})\)/.exec(led.stdout);
      assert.ok(started, led.stdout);
      assert.match(led.stdout, /Allow delete_file\(\{"path": "old\.txt"\}\)/);
      assert.ok(led.stdout.includes(`⇠ child ${started[1]} COMPLETED\n`), led.stdout);
      const done = /done: Tool results: delegate: (.*)\n/.exec(led.stdout);
      assert.ok(done, led.stdout);
      assert.deepEqual(JSON.parse(done[1]!), {
        execution_id: started[1],
        subagent: "reviewer",
        status: "completed",
        output: "Tool results: delete_file: Deleted old.txt.",
      });
      const stored = JSON.parse(readFileSync(file, "utf8")) as { pending?: unknown };
      assert.equal(stored.pending, undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("--thread drives a thread the server keeps by its ID only, and writes no file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "threadline-host-"));
    const threadId = `thread_host${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    try {
      const approved = await host(["--thread", threadId, "delete notes.txt"], "y\n", dir);
      assert.equal(approved.code, 0, approved.stderr);
      assert.match(approved.stdout, new RegExp(`created thread ${threadId}\n`));
      assert.match(approved.stdout, /Allow delete_file/);
      assert.match(approved.stdout, /done: Tool results: delete_file: Deleted notes\.txt\./);

      // Later sessions find the thread by its ID: the counter lives in the server's thread.
      for (const expected of ["count: 1", "count: 2"]) {
        const counted = await host(["--thread", threadId, "count"], "", dir);
        assert.equal(counted.code, 0, counted.stderr);
        assert.match(counted.stdout, new RegExp(`thread ${threadId} is at revision \\d+, IDLE`));
        assert.ok(counted.stdout.includes(`done: Tool results: ${expected}\n`), counted.stdout);
      }
      const tool = await host(["--thread", threadId, 'client:local_time {"zone": "UTC"}'], "", dir);
      assert.equal(tool.code, 0, tool.stderr);
      assert.match(tool.stdout, /done: Tool results: local_time: \d{1,2}:\d\d:\d\d UTC/);
      assert.deepEqual(readdirSync(dir), [], "the host wrote no state file");
      const thread = await client.threads.get(threadId);
      assert.ok(tool.stdout.includes(`thread ${threadId} is now at revision ${thread.revision}\n`), tool.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("--thread answers a thread left suspended in a later session", async () => {
    const thread = await client.threads.create();
    const first = await client.threads.run(thread.threadId, { text: "delete later.txt" });
    assert.equal(first.result.status, RunStatus.SUSPENDED);

    const later = await host(["--thread", thread.threadId], "y\n");

    assert.equal(later.code, 0, later.stderr);
    assert.match(later.stdout, /1 deferred call\(s\) wait for an answer/);
    assert.match(later.stdout, /done: Tool results: delete_file: Deleted later\.txt\./);
    const afterwards = await client.threads.get(thread.threadId);
    assert.equal(afterwards.status, ThreadStatus.IDLE);
    assert.ok(afterwards.revision > first.revision);
    assert.ok(later.stdout.includes(`is now at revision ${afterwards.revision}\n`), later.stdout);
  });

  test("--join prints a run's events and --watch the thread's changes", async () => {
    const thread = await client.threads.create();
    const watcher = spawn(process.execPath, ["--import", TSX, HOST, "--addr", server.baseUrl, "--thread", thread.threadId, "--watch"], {
      cwd: PACKAGE_DIR,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let watched = "";
    let errors = "";
    watcher.stdout.setEncoding("utf8").on("data", (chunk: string) => (watched += chunk));
    watcher.stderr.setEncoding("utf8").on("data", (chunk: string) => (errors += chunk));
    const exited = new Promise<number | null>((resolve) => watcher.on("close", resolve));
    const until = async (pattern: RegExp) => {
      const deadline = Date.now() + 30_000;
      while (!pattern.test(watched)) {
        assert.ok(Date.now() < deadline, `--watch printed no ${pattern} in 30 s:\n${watched}\n${errors}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    let outcome;
    try {
      await until(/ SNAPSHOT: IDLE at revision /);
      outcome = await client.threads.run(thread.threadId, { text: "lookup grpc" });
      await until(/RUN_ENDED/);
      assert.match(watched, /RUN_STARTED/);
      assert.match(watched, /COMMITTED/);
    } finally {
      watcher.kill("SIGINT");
    }
    assert.equal(await exited, 0, errors);

    const runId = outcome.result.runId;
    const joined = await host(["--thread", thread.threadId, "--join", runId], "");
    assert.equal(joined.code, 0, joined.stderr);
    for (const line of ["   0 runStarted " + runId, " toolCall lookup(", " threadCommitted revision ", " result COMPLETED", `(run ${runId}: revision ${outcome.revision})`]) {
      assert.ok(joined.stdout.includes(line), `--join lacks ${JSON.stringify(line)}:\n${joined.stdout}`);
    }
    const latest = await host(["--thread", thread.threadId, "--join", "latest"], "");
    assert.equal(latest.stdout, joined.stdout);
  });

  test("--start runs the turn in the background and prints its run ID, its events and its result", async () => {
    const threadId = `thread_host${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const started = await host(["--thread", threadId, "--start", "sleep 1"], "");
    assert.equal(started.code, 0, started.stderr);
    const line = /started (run-[0-9a-f]+) \(request (req-[0-9a-f]{32})\) from revision 1: RUNNING\n/.exec(started.stdout);
    assert.ok(line, started.stdout);
    const [, runId, requestId] = line;
    const thread = await client.threads.get(threadId);
    for (const expected of [
      `created thread ${threadId}\n`,
      `   0 runStarted ${runId}\n`,
      " toolCall sleep(",
      " result COMPLETED\n",
      `(request ${requestId}: revision ${thread.revision})\n`,
      "done: Tool results: sleep: Slept 1 s.\n",
    ]) {
      assert.ok(started.stdout.includes(expected), `--start lacks ${JSON.stringify(expected)}:\n${started.stdout}`);
    }
    const refused = await host(["--thread", threadId, "--start"], "");
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /--start takes --thread ID and a prompt/);
  });

  test("--thread without a prompt or anything pending asks for a prompt", async () => {
    const idle = await host(["--thread", `thread_host${randomUUID().replaceAll("-", "").slice(0, 12)}`], "");
    assert.equal(idle.code, 2);
    assert.match(idle.stderr, /nothing is pending/);
  });
});

// Skipped only when the folder does not exist.
describe("golden vectors", { skip: existsSync(VECTORS_DIR) ? false : `${VECTORS_DIR} does not exist` }, () => {
  for (const [name, typeName] of existsSync(VECTORS_DIR) ? manifest() : []) {
    test(`${name} (${typeName}) decodes and re-encodes in both forms`, () => {
      checkVector(name, typeName);
    });
  }
  test("checkpoint_delta rebuilds from state_full's history to its sha256", () => {
    checkDeltaVector();
  });
  test("state_environment decodes with decodeState and carries the foreign entry byte for byte", () => {
    checkStateEnvironmentVector();
  });
  test("the manifest names every vector file", () => {
    assert.ok(manifest().length > 0);
    assert.deepEqual(unlistedFiles(), []);
  });
});
