/**
 * `client.threads`: durable threads the server keeps (`threadline.v1.ThreadService`, THREADS.md).
 *
 * With `HarnessService` the host stores every state and sends it back; here the server stores the
 * thread and the host sends only what is new: a prompt, or its answers to `Thread.pending` by call
 * ID (`answers(...)`). Three rules shape this module:
 *
 * - Every run request carries a `requestId`, fresh (`req-<32 hex>`) unless the caller gives one.
 *   The server answers a request ID once: a retry gets the stored outcome (`replayed`), never a
 *   second run (a retry while it runs attaches to it). So `run` retries UNAVAILABLE and transport
 *   failures with the same ID, up to `RUN_RETRIES` times within its deadline, and `stream`
 *   reconnects a broken stream by joining its run from the last sequence it yielded.
 * - A thread run outlives its RPC: leaving a stream early, a deadline or a dropped connection
 *   stops the events, not the run, which goes on to commit. Stop a run with `cancel`.
 * - A thread runs one request at a time. A request for a busy thread fails with `ThreadBusy`, or,
 *   with `busyStrategy: "enqueue"`, waits in the thread's durable queue (`Thread.queue`) and runs
 *   in its turn, after the requests accepted before it; with `busyStrategy: "interrupt"` it stops
 *   the running turn (CANCELLED, its progress committed) and runs next, ahead of the queue; with
 *   `busyStrategy: "rollback"` it does the same and first throws that turn's commits away.
 * - A thread run's `RunResult` has no `state`; the state is the checkpoint at the outcome's
 *   `revision` (`checkpoint(threadId, revision)`), so a turn's answer does not grow with the thread.
 *
 * ```ts
 * const thread = await client.threads.create({ labels: { user: "ada" } });
 * let outcome = await client.threads.run(thread.threadId, { text: "delete notes.txt" });
 * if (outcome.result.status === RunStatus.SUSPENDED) {
 *   const call = outcome.result.deferred!.approvals[0]!;
 *   outcome = await client.threads.run(thread.threadId, { answers: answers(approve(call)) });
 * }
 * ```
 *
 * @module
 */


import { create } from "@bufbuild/protobuf";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { Client, CallOptions as ConnectCallOptions } from "@connectrpc/connect";

import { type CallOptions, type PackedEvents, call, connectOptions, required, serverStream, streamEvents } from "./calls.js";
import { ListenerTooSlow, RunAttemptLost, RunEventsExpired, ThreadlineError } from "./errors.js";
import type {
  DeferredToolRequests,
  DeferredToolResultsSchema,
  DeferredToolResume,
} from "./gen/threadline/v1/deferred_pb.js";
import type { RunEvent } from "./gen/threadline/v1/events_pb.js";
import type {
  ClientToolSchema,
  PromptPartsSchema,
  RunResult,
  ToolRecovery,
  UsageLimitsSchema,
} from "./gen/threadline/v1/run_pb.js";
import type { HarnessState } from "./gen/threadline/v1/state_pb.js";
import type { Checkpoint, Thread } from "./gen/threadline/v1/thread_pb.js";
import { ThreadRunStatus, ThreadStatus } from "./gen/threadline/v1/thread_pb.js";
import {
  BusyStrategy,
  type JoinThreadRunRequest,
  type ListThreadsResponse,
  type StartThreadRunResponse,
  ThreadRunSpecSchema,
  type ThreadRunSpec,
  type ThreadService,
  ThreadView,
  type WatchThreadResponse,
} from "./gen/threadline/v1/thread_service_pb.js";

/** How many times `Threads.run` sends a request again after UNAVAILABLE, with the same request ID. */
export const RUN_RETRIES = 3;
/** Milliseconds before the first retry of `Threads.run`; doubled before each next one. */
const RETRY_BACKOFF_MS = 200;
/**
 * How many times in a row a thread run stream (`stream`, `joinRun`) or `watchThread` reconnects
 * after a transport failure without receiving anything in between, 200 ms apart and doubling; also
 * how many times a stream follows a lost attempt's next one.
 */
export const RECONNECT_RETRIES = 5;

/** One message of `watchThread`: the thread (BASIC view) now, its `changeSequence`, and the `changes` since the last. */
export type ThreadUpdate = WatchThreadResponse;

/** A fresh request ID, `req-<32 lowercase hex>`: what the SDK sends unless the caller gives one. */
export function newRequestId(): string {
  return `req-${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}

/** A client tool declaration: a `ClientTool`, or a plain object of its fields. */
export type ClientToolInput = MessageInitShape<typeof ClientToolSchema>;

/** A revision: the contract's int64 as a `bigint`, or a safe integer. */
export type Revision = bigint | number;

/**
 * What a run request does when its thread is busy (a run holds it, or requests wait in its queue):
 * `ThreadRunInput.busyStrategy`, the contract's `BusyStrategy` by name.
 *
 * - `"reject"` (the default): fail at once with `ThreadBusy` (ABORTED THREAD_BUSY).
 * - `"enqueue"`: wait in the thread's durable queue (`Thread.queue`) and run after the requests
 *   accepted before it, each once, in acceptance order; a free thread with an empty queue runs it at
 *   once. `startRun` answers QUEUED at once (`StartedRun.queuePosition`); `run` and `stream` wait
 *   (no events) until it starts, then follow it from its first event. Beyond the server's
 *   `--max-queued-runs` waiting requests it fails with `ThreadQueueFull`. Answers are never queued:
 *   `answers` for a running thread fail with `ThreadNotSuspended`.
 * - `"interrupt"`: stop the running turn and run this input next. With a run holding the thread it
 *   waits first in the queue (after earlier interrupting requests, before every enqueued one;
 *   `QueuedRunKind.INTERRUPTING`) and the holder is asked to stop as `cancel` asks it: it ends
 *   CANCELLED with its progress committed (its caller gets that CANCELLED result), then this request
 *   runs, then the enqueued ones. A holder that is itself an interrupting request is not stopped:
 *   they line up in arrival order. With nothing running it runs at once, ahead of a waiting queue.
 *   Otherwise as `"enqueue"`: `startRun` answers QUEUED, `ThreadQueueFull` bounds the queue, answers
 *   for a running thread fail with `ThreadNotSuspended`.
 * - `"rollback"`: `"interrupt"`, and the interrupted turn is thrown away. It waits in one line with
 *   the interrupting requests, by arrival (`QueuedRunKind.ROLLING_BACK`), the holder is stopped the
 *   same way (CANCELLED, its candidate committed), then, before this request runs, the head goes
 *   back to where the interrupted request began: a `ROLLED_BACK` checkpoint copying it, as
 *   `rollback` writes one (the discarded checkpoints stay listed). Nothing is copied unless that
 *   request committed something and every checkpoint since is its own. So this input is answered as
 *   if the interrupted turn never happened; its `answers` may answer the batch that request began
 *   from.
 *
 * The strategy is part of the request: a retry with the same `requestId` must send the same one, or
 * it is `RequestIdReused`.
 */
export type BusyStrategyName = "reject" | "enqueue" | "interrupt" | "rollback";

/** The contract's `BusyStrategy` of each name. */
const BUSY_STRATEGIES: Readonly<Record<BusyStrategyName, BusyStrategy>> = {
  reject: BusyStrategy.REJECT,
  enqueue: BusyStrategy.ENQUEUE,
  interrupt: BusyStrategy.INTERRUPT,
  rollback: BusyStrategy.ROLLBACK,
};

/** How a thread run ended: `Threads.run`, or `ThreadRunStream.collect()`. */
export interface ThreadRunOutcome {
  /** The terminal result; `state` is unset (it is the checkpoint at `revision`). */
  readonly result: RunResult;
  /**
   * The revision of the run's terminal checkpoint, the thread's head after it. 0n when the run
   * committed nothing (a run `cancel` closed after its server was gone).
   */
  readonly revision: bigint;
  /** True when the server answered an already finished request again: nothing ran this time. */
  readonly replayed: boolean;
}

/** Options of `Threads.create`. */
export interface CreateThreadOptions extends CallOptions {
  /** The new thread's ID; default `state.threadId` with a state, else a server-made `thread_<32 hex>`. */
  threadId?: string;
  /** The agent of every run of the thread; default the server's default agent. */
  agent?: string;
  /** Up to 32 labels to find it by (`list({ labels })`); set now, never changed. */
  labels?: Record<string, string>;
  /** A host-held state to import (validated like a run's previous state). */
  state?: HarnessState;
  /**
   * The batch `state` is suspended on, exactly as `RunResult.deferred` gave it; the thread is
   * then SUSPENDED, and its next run answers it by call ID.
   */
  pending?: DeferredToolRequests;
  /** A resume the host accepted whose run did not finish; the next run recovers what its history lacks. Not with `pending`. */
  accepted?: DeferredToolResume;
  /** The client tools `state` was made with, for a resume that declares none. */
  clientTools?: ClientToolInput[];
}

/** Options of `Threads.get`. */
export interface GetThreadOptions extends CallOptions {
  /** Add the head checkpoint's `state` (the FULL view). Default false. */
  full?: boolean;
}

/** Filters of `Threads.list` and `Threads.listPage`. */
export interface ListThreadsOptions extends CallOptions {
  /** Only threads with every one of these labels. */
  labels?: Record<string, string>;
  /** Only threads with this status; default any. */
  status?: ThreadStatus;
  /** Threads per request; 0 = the server's default (100), at most 1000. */
  pageSize?: number;
}

/** Options of `Threads.listPage`. */
export interface ListThreadsPageOptions extends ListThreadsOptions {
  /** The previous page's `nextPageToken`; empty = the first page. Pass the same filters with it. */
  pageToken?: string;
}

/** Options of calls that change a thread only if its head is still the one the host read. */
export interface ExpectedRevisionOptions extends CallOptions {
  /** Act only if this is still the head; 0 (the default) = whatever the head is. */
  expectedRevision?: Revision;
}

/** Options of `Threads.checkpoints`. */
export interface ListCheckpointsOptions extends CallOptions {
  /** Checkpoints per request; 0 = the server's default (100), at most 1000. */
  pageSize?: number;
}

/** Options of `Threads.fork`. */
export interface ForkThreadOptions extends CallOptions {
  /** The checkpoint to branch from; 0 (the default) = the head. */
  revision?: Revision;
  /** The new thread's ID; default server-made. */
  newThreadId?: string;
  /** The new thread's labels. */
  labels?: Record<string, string>;
}

/** What to run on a thread, and the call's options: `Threads.stream` and `Threads.run`. */
export interface ThreadRunInput extends CallOptions {
  /** A text prompt. Not together with `parts`; neither = no new input. */
  text?: string;
  /** A prompt of several parts. */
  parts?: MessageInitShape<typeof PromptPartsSchema>;
  /** Answers to every item of `Thread.pending`, by call ID (`answers(...)`). */
  answers?: MessageInitShape<typeof DeferredToolResultsSchema>;
  /** This request's ID, unique per thread; default (or "") a fresh `newRequestId()`. Reuse it only to retry. */
  requestId?: string;
  /** Run only if this is still the head; 0 (the default) = whatever the head is. */
  expectedRevision?: Revision;
  /** How to settle calls the head left unanswered; default DECLARED. */
  toolRecovery?: ToolRecovery;
  /** The host's tools for this run; none on a resume or recovery = the head checkpoint's. */
  clientTools?: ClientToolInput[];
  /** Limits on the run's model usage; default the agent's own. */
  usageLimits?: MessageInitShape<typeof UsageLimitsSchema>;
  /**
   * What to do when the thread is busy: `"reject"` (the default: `ThreadBusy`), `"enqueue"` (wait
   * in its queue for its turn), `"interrupt"` (stop the running turn, which ends CANCELLED, and
   * run next, ahead of the queue) or `"rollback"` (as `"interrupt"`, and discard the stopped turn's
   * commits first); see `BusyStrategyName`. Unset sends the contract's default
   * (UNSPECIFIED, which is REJECT). A retry must send the same strategy.
   */
  busyStrategy?: BusyStrategyName;
  /**
   * `stream` only: reconnect a broken stream by joining its run, and send the request again when
   * its attempt is lost (default true). `false`: the first error ends the stream.
   */
  reconnect?: boolean;
}

/**
 * What `Threads.startRun` runs, and the call's options: those of `run`. `timeoutMs` (default the
 * client's unary `timeoutMs`) bounds the start, its retries included, not the run.
 */
export type StartRunInput = Omit<ThreadRunInput, "reconnect">;

/** Options of `StartedRun.events`: from where, and the call's options. */
export interface StartedRunEventsOptions extends CallOptions {
  /**
   * Only the events of the attempt `runId` with a greater sequence; default all the request's
   * events, from its latest attempt's first, following its next attempts.
   */
  afterSequence?: bigint | number;
  /** Reconnect after a transport failure (default true); `false`: the first error ends the stream. */
  reconnect?: boolean;
}

/** Which attempt `Threads.joinRun` follows, from where, and the call's options. */
export interface JoinRunOptions extends CallOptions {
  /** The attempt to follow (`RunEvent.runId`, `Thread.lease.runId`); any attempt's. */
  runId?: string;
  /** Follow this request's latest attempt, and its next one when that attempt is lost. With `runId`, both must name one request. */
  requestId?: string;
  /** Only the events with a greater sequence (a stream that broke after k continues with k); default from the first (0). */
  afterSequence?: bigint | number;
  /** Reconnect after a transport failure (default true); `false`: the first error ends the stream. */
  reconnect?: boolean;
}

/** Options of `Threads.watchThread`: `signal`, `headers`; `timeoutMs` (default none) bounds each call. */
export interface WatchThreadOptions extends CallOptions {
  /** Reconnect after a transport failure, to a new snapshot (default true). */
  reconnect?: boolean;
}

/** How a `Threads` reaches the server: the client's `ThreadService` client and its defaults. */
export interface ThreadsConfig {
  readonly service: Client<typeof ThreadService>;
  readonly unaryTimeoutMs: number;
  readonly runTimeoutMs: number;
  readonly maxEventsPerMessage: number;
}

/** What a `StartedRun` is made of: `Threads.startRun` makes one. */
export interface StartedRunInit {
  /** The threads client that started it. */
  readonly threads: Threads;
  /** The thread it runs. */
  readonly threadId: string;
  /** The server's answer to the start. */
  readonly response: StartThreadRunResponse;
  /** Send the same `StartThreadRun` again (same spec, same request ID); UNAVAILABLE retried. */
  readonly start: (options: CallOptions) => Promise<StartThreadRunResponse>;
  /** The default deadline of `result()` (the client's `runTimeoutMs`); 0 = none. */
  readonly runTimeoutMs: number;
}

/**
 * The events of one `StreamThreadRun` call, for `for await` (once), with the run's outcome.
 *
 * The events are those of `streamRun` without checkpoint candidates, plus a `threadCommitted`
 * event after each checkpoint the run commits; the terminal commit's comes right before
 * `result`. Leaving a `for await` loop early (or `close()`, a deadline, an aborted signal) ends
 * the call, not the run: the run goes on to its terminal commit on the server. To learn its
 * outcome, send the same request again with `requestId: stream.requestId`, or `joinRun` its
 * `runId` from `lastSequence`; to stop it, `threads.cancel`. To read some events and then the
 * rest, call `next()` and then `collect()`. `joinRun` returns one too, for a run it follows.
 *
 * Unless `reconnect: false`, the stream reconnects by itself after a transport failure
 * (UNAVAILABLE, a broken connection): it joins the attempt again from the last sequence it
 * yielded, so no event comes twice and none is lost.
 */
export class ThreadRunStream implements AsyncIterableIterator<RunEvent, void> {
  /** The thread the request runs. */
  readonly threadId: string;
  /** The request's ID: send it again (same body) to retry without running twice. */
  readonly requestId: string;
  #revision = 0n;
  #replayed = false;
  #result: RunResult | undefined;
  #runId = "";
  #lastSequence: bigint | undefined;
  readonly #events: AsyncGenerator<RunEvent, void, undefined>;

  /**
   * @param threadId - The thread the request runs.
   * @param requestId - The request ID the request carries.
   * @param open - Start the call; each event goes through the given function before it is yielded.
   */
  constructor(
    threadId: string,
    requestId: string,
    open: (accept: (event: RunEvent) => void) => AsyncGenerator<RunEvent, void, undefined>,
  ) {
    this.threadId = threadId;
    this.requestId = requestId;
    this.#events = open((event) => this.#accept(event));
  }

  /** The revision of the latest checkpoint the stream reported committed; 0n before any. */
  get revision(): bigint {
    return this.#revision;
  }

  /** The attempt the stream follows (the run ID of its last event); "" before the first. */
  get runId(): string {
    return this.#runId;
  }

  /** The sequence of the last event yielded; undefined before the first (`joinRun`'s `afterSequence` to continue). */
  get lastSequence(): bigint | undefined {
    return this.#lastSequence;
  }

  /** True once the stream showed that it replays an already finished request. */
  get replayed(): boolean {
    return this.#replayed;
  }

  /** The run's outcome once its `result` event has been read; undefined before. */
  get outcome(): ThreadRunOutcome | undefined {
    if (this.#result === undefined) {
      return undefined;
    }
    return { result: this.#result, revision: this.#revision, replayed: this.#replayed };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The next event; the call starts with the first. */
  next(): Promise<IteratorResult<RunEvent, void>> {
    return this.#events.next();
  }

  /** Stop reading and close the call (what leaving a `for await` loop does); the run goes on. */
  async return(): Promise<IteratorResult<RunEvent, void>> {
    await this.close();
    return { done: true, value: undefined };
  }

  /** Stop reading and close the call; the run itself goes on on the server. Idempotent. */
  async close(): Promise<void> {
    await this.#events.return(undefined);
  }

  /**
   * Read the remaining events and return the run's outcome.
   *
   * @throws ThreadlineError as iterating does (`ProtocolError` when the stream ends without its
   *   result); `Error` when the stream was closed before its result.
   */
  async collect(): Promise<ThreadRunOutcome> {
    while ((await this.next()).done !== true) {
      // Each event updates the outcome as it passes.
    }
    const outcome = this.outcome;
    if (outcome === undefined) {
      throw new Error("the stream was closed before its result");
    }
    return outcome;
  }

  #accept(event: RunEvent): void {
    this.#runId = event.runId;
    this.#lastSequence = event.sequence;
    switch (event.event.case) {
      case "threadCommitted":
        this.#revision = event.event.value.revision;
        this.#replayed ||= event.event.value.replayed;
        break;
      case "result":
        this.#result = event.event.value;
        break;
      default:
        break;
    }
  }
}

/**
 * A thread run started in the background (`Threads.startRun`): the server runs it with no client
 * and drives it to its end, running a next attempt itself if its server is lost.
 *
 * ```ts
 * const started = await client.threads.startRun(threadId, { text: "summarise the logs" });
 * started.runId;                                   // RUNNING: the attempt that runs it now
 * for await (const event of started.events()) { ... }   // its events, as `joinRun` yields them
 * const { result, revision } = await started.result();  // waits for its end
 * await started.cancel();                          // or stop it
 * ```
 *
 * A request started with `busyStrategy: "enqueue"`, `"interrupt"` or `"rollback"` on a busy thread
 * is QUEUED: it waits in `Thread.queue` at `queuePosition` (an interrupting or rolling-back one
 * ahead of the enqueued ones, while the run it interrupts stops), and its first attempt will run
 * under `runId`. `events()` and
 * `result()` wait for it to start, then follow it; `cancel()` takes it out of the queue at once
 * (it never runs, and `result()` is CANCELLED).
 *
 * Another process can do the same with the request ID: `startRun(threadId, { ...same input,
 * requestId })` answers the same request again (QUEUED while it waits, RUNNING while it runs, then
 * `replayed`).
 */
export class StartedRun {
  /** The thread it runs. */
  readonly threadId: string;
  /**
   * The attempt that runs the request now (or ran it last, when `replayed`); QUEUED: the run ID its
   * first attempt will run under (join it, cancel it).
   */
  readonly runId: string;
  /** The request's ID: `startRun` with it (and the same input) answers this request again. */
  readonly requestId: string;
  /**
   * RUNNING: the head the run began from. QUEUED: the head when the start answered (the run begins
   * from whatever head its turn finds). Replayed: the revision of its terminal checkpoint.
   */
  readonly revision: bigint;
  /**
   * RUNNING while the run goes on; QUEUED while the request waits in the thread's queue
   * (`busyStrategy: "enqueue"`, `"interrupt"` or `"rollback"`); for a request that had finished
   * (`replayed`), how it ended.
   */
  readonly status: ThreadRunStatus;
  /**
   * QUEUED: the request's place in `Thread.queue` when the start answered (1 = next); 0 otherwise.
   * It moves up as the requests before it run or are cancelled, and an enqueued request moves down
   * when an interrupting one is accepted after it (it waits ahead): read `Thread.queue` for now.
   */
  readonly queuePosition: number;
  /** True when the start answered a request that had already finished: nothing ran again. */
  readonly replayed: boolean;
  /** When `replayed`, its outcome (`result` without `state`, `revision`, `replayed: true`); undefined while it runs. */
  readonly outcome: ThreadRunOutcome | undefined;
  readonly #threads: Threads;
  readonly #start: (options: CallOptions) => Promise<StartThreadRunResponse>;
  readonly #runTimeoutMs: number;

  /** Made by `Threads.startRun`. */
  constructor(init: StartedRunInit) {
    const { response } = init;
    this.threadId = init.threadId;
    this.runId = response.runId;
    this.requestId = response.requestId;
    this.revision = response.revision;
    this.status = response.status;
    this.queuePosition = response.queuePosition;
    this.replayed = response.replayed;
    this.outcome = replayedOutcome(response);
    this.#threads = init.threads;
    this.#start = init.start;
    this.#runTimeoutMs = init.runTimeoutMs;
  }

  /**
   * Follow the run (`JoinThreadRun`), live or finished, as `joinRun` does: without `afterSequence`,
   * by its request ID, from its latest attempt's first event and on to its next attempts when one
   * is lost; with `afterSequence` k, the events of the attempt `runId` after k. A QUEUED request's
   * stream yields nothing until it starts (within `timeoutMs`, default the client's `runTimeoutMs`).
   *
   * @throws while iterating, as `joinRun`: e.g. `RunEventsExpired` once the log is past its
   *   retention (`result()` still reads the outcome), `Code.Unimplemented` with the log off.
   */
  events(options: StartedRunEventsOptions = {}): ThreadRunStream {
    const { afterSequence, ...rest } = options;
    return afterSequence === undefined
      ? this.#threads.joinRun(this.threadId, { ...rest, requestId: this.requestId })
      : this.#threads.joinRun(this.threadId, { ...rest, runId: this.runId, afterSequence });
  }

  /**
   * Wait for the request's end, following its next attempts, and return its outcome, as `run`
   * returns it (`replayed` when the start had already found it finished).
   *
   * It joins the request to its result (a QUEUED request's join waits for its turn first). When the
   * join cannot say how it ended (its attempt was
   * lost and the request closed without that attempt's result, its log is past its retention or
   * not kept), it sends the same `StartThreadRun` again, whose answer is the stored outcome, or
   * the request's error status (thrown); while that answers RUNNING (a next attempt not begun
   * yet), it waits (200 ms, doubling up to 3.2 s) and joins again. `timeoutMs` (default the
   * client's `runTimeoutMs`) bounds the whole wait.
   *
   * @throws ThreadlineError e.g. `RequestInterrupted` (its `attempts` lost their server),
   *   `ThreadNotFound`, `Code.DeadlineExceeded`; what its retry answers for a request that ended
   *   with an error status.
   */
  async result(options: CallOptions = {}): Promise<ThreadRunOutcome> {
    if (this.outcome !== undefined) {
      return this.outcome;
    }
    const timeoutMs = options.timeoutMs ?? this.#runTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
    const left = () => (deadline === undefined ? 0 : Math.max(1, deadline - Date.now()));
    for (let waits = 0; ; ) {
      try {
        return await this.#threads.joinRun(this.threadId, { ...options, requestId: this.requestId, timeoutMs: left() }).collect();
      } catch (err) {
        const error = ThreadlineError.from(err);
        if (!(error instanceof RunAttemptLost || error instanceof RunEventsExpired || error.code === Code.Unimplemented)) {
          throw error;
        }
      }
      const response = await this.#start({ ...options, timeoutMs: left() });
      const outcome = replayedOutcome(response);
      if (outcome !== undefined) {
        return outcome;
      }
      waits = Math.min(waits + 1, 5);
      await backoff(waits, options.signal);
    }
  }

  /**
   * Ask the run to stop (`CancelThreadRun`, as `Threads.cancel`); it ends CANCELLED with its
   * progress committed, which `result()` then returns. Returns the run record's status at once:
   * RUNNING while the run stops, CANCELLED when its server was gone or the request was still
   * QUEUED (taken out of the queue: it never runs), or how it had ended.
   */
  async cancel(options: CallOptions = {}): Promise<ThreadRunStatus> {
    return this.#threads.cancel(this.threadId, this.runId, options);
  }
}

/** The outcome a `StartThreadRunResponse` replays; undefined when it is not `replayed`. */
function replayedOutcome(response: StartThreadRunResponse): ThreadRunOutcome | undefined {
  if (!response.replayed) {
    return undefined;
  }
  const result = required(response.result, "StartThreadRunResponse.result");
  return { result, revision: response.revision, replayed: true };
}

/**
 * `ThreadService`: threads the server stores, runs one at a time, and answers exactly once.
 *
 * Get it as `client.threads`: it shares the client's connection, token, TLS and default
 * deadlines (unary calls the client's `timeoutMs`, `stream` and `run` its `runTimeoutMs`). Every
 * method takes its options last, with `signal`, `timeoutMs` (for one call or, for the listings,
 * for each page) and `headers`. Failures throw `ThreadlineError`, of the subclass its reason
 * names (`ThreadNotFound`, `ThreadBusy`, `RevisionConflict`, …).
 */
export class Threads {
  /** The generated Connect client, for anything `Threads` does not wrap (errors are not converted). */
  readonly service: Client<typeof ThreadService>;
  readonly #unaryTimeoutMs: number;
  readonly #runTimeoutMs: number;
  readonly #maxEventsPerMessage: number;

  /** Made by `createThreadlineClient`; use `client.threads`. */
  constructor(config: ThreadsConfig) {
    this.service = config.service;
    this.#unaryTimeoutMs = config.unaryTimeoutMs;
    this.#runTimeoutMs = config.runTimeoutMs;
    this.#maxEventsPerMessage = config.maxEventsPerMessage;
  }

  // --- threads ---------------------------------------------------------------------------------

  /**
   * Create a thread: empty, or importing a state the host held (e.g. from `HarnessService`).
   *
   * @throws ThreadExists when the ID is in use; `ThreadlineError` e.g. `STATE_INVALID`,
   *   `INPUT_INVALID`, `AGENT_UNKNOWN`, or a `pending` batch that does not match the state.
   */
  async create(options: CreateThreadOptions = {}): Promise<Thread> {
    const { threadId = "", agent = "", labels = {}, state, pending, accepted, clientTools = [], ...rest } = options;
    const response = await call(
      this.service.createThread({ threadId, agent, labels, state, pending, accepted, clientTools }, this.#unary(rest)),
    );
    return required(response.thread, "CreateThreadResponse.thread");
  }

  /**
   * A thread as it is now; `{ full: true }` adds its head checkpoint's `state`. Its `queue` lists the
   * requests waiting for their turn (`busyStrategy: "enqueue"`, `"interrupt"` or `"rollback"`), in
   * the order they will run, each a `QueuedRun` (`requestId`, `runId` its first attempt will take,
   * `kind` `ENQUEUED`, `INTERRUPTING` or `ROLLING_BACK`, `createTime`).
   *
   * @throws ThreadNotFound when no thread has this ID.
   */
  async get(threadId: string, options: GetThreadOptions = {}): Promise<Thread> {
    const { full = false, ...rest } = options;
    const view = full ? ThreadView.FULL : ThreadView.BASIC;
    const response = await call(this.service.getThread({ threadId, view }, this.#unary(rest)));
    return required(response.thread, "GetThreadResponse.thread");
  }

  /** One page of `list`: its `threads` and the `nextPageToken` (empty on the last page). */
  async listPage(options: ListThreadsPageOptions = {}): Promise<ListThreadsResponse> {
    const { labels = {}, status = ThreadStatus.UNSPECIFIED, pageSize = 0, pageToken = "", ...rest } = options;
    const request = { labels: labelList(labels), status, pageSize, pageToken };
    return call(this.service.listThreads(request, this.#unary(rest)));
  }

  /**
   * Every matching thread, newest `updateTime` first, walking every page. Their `queue` is empty
   * (`get` reads it).
   *
   * ```ts
   * for await (const thread of client.threads.list({ labels: { user: "ada" } })) { ... }
   * ```
   */
  async *list(options: ListThreadsOptions = {}): AsyncGenerator<Thread, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.listPage({ ...options, pageToken });
      yield* page.threads;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Delete a thread with its checkpoints and run records.
   *
   * @throws ThreadNotFound; `ThreadBusy` while a run holds the thread; `RevisionConflict` when
   *   the head is not `expectedRevision`.
   */
  async delete(threadId: string, options: ExpectedRevisionOptions = {}): Promise<void> {
    const { expectedRevision = 0n, ...rest } = options;
    await call(this.service.deleteThread({ threadId, expectedRevision: BigInt(expectedRevision) }, this.#unary(rest)));
  }

  /**
   * Branch a new thread from a committed checkpoint (default the head), with the same agent.
   *
   * The new thread's first checkpoint (FORKED, revision 1) keeps the source checkpoint's pending
   * batch, retained answers and client tools: a fork of a SUSPENDED checkpoint is SUSPENDED on
   * the same calls. Environment states are cleared (SPEC §1.5). The source may be running.
   *
   * @throws ThreadNotFound, CheckpointNotFound when there is no such source; `ThreadExists` when
   *   `newThreadId` is in use (the source's own ID is `FORK_THREAD_ID_CONFLICT`).
   */
  async fork(threadId: string, options: ForkThreadOptions = {}): Promise<Thread> {
    const { revision = 0n, newThreadId = "", labels = {}, ...rest } = options;
    const response = await call(
      this.service.forkThread({ threadId, revision: BigInt(revision), newThreadId, labels }, this.#unary(rest)),
    );
    return required(response.thread, "ForkThreadResponse.thread");
  }

  /**
   * Make an earlier checkpoint current again, as a new head (ROLLED_BACK); nothing is deleted.
   * The thread's status follows the copied checkpoint: SUSPENDED again on its calls if it was,
   * and answering them again runs them again.
   *
   * @throws CheckpointNotFound; `ThreadBusy` while a run holds the thread; `RevisionConflict`
   *   when the head is not `expectedRevision`.
   */
  async rollback(threadId: string, revision: Revision, options: ExpectedRevisionOptions = {}): Promise<Thread> {
    const { expectedRevision = 0n, ...rest } = options;
    const request = { threadId, revision: BigInt(revision), expectedRevision: BigInt(expectedRevision) };
    const response = await call(this.service.rollbackThread(request, this.#unary(rest)));
    return required(response.thread, "RollbackThreadResponse.thread");
  }

  // --- checkpoints -----------------------------------------------------------------------------

  /**
   * Every checkpoint of a thread, newest first, without its `state`, walking every page.
   *
   * @throws ThreadNotFound when no thread has this ID.
   */
  async *checkpoints(threadId: string, options: ListCheckpointsOptions = {}): AsyncGenerator<Checkpoint, void, undefined> {
    const { pageSize = 0, ...rest } = options;
    let pageToken = "";
    do {
      const page = await call(this.service.listCheckpoints({ threadId, pageSize, pageToken }, this.#unary(rest)));
      yield* page.checkpoints;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * One checkpoint with its `state` and pending batch, e.g. the state a run's outcome points at.
   *
   * @throws ThreadNotFound; `CheckpointNotFound` when the thread has no such revision.
   */
  async checkpoint(threadId: string, revision: Revision, options: CallOptions = {}): Promise<Checkpoint> {
    const response = await call(this.service.getCheckpoint({ threadId, revision: BigInt(revision) }, this.#unary(options)));
    return required(response.checkpoint, "GetCheckpointResponse.checkpoint");
  }

  // --- runs ------------------------------------------------------------------------------------

  /**
   * Run the thread's next turn and stream its events, `threadCommitted` then `result` last.
   *
   * ```ts
   * const stream = client.threads.stream(threadId, { text: "lookup grpc" });
   * for await (const event of stream) { ... }
   * const { result, revision, replayed } = stream.outcome!;
   * ```
   *
   * The stream reconnects by itself unless `reconnect: false`: after a transport failure
   * (UNAVAILABLE, a broken connection) it joins its run (`JoinThreadRun` with the run ID and the
   * last sequence it yielded), so the loop sees every event of the attempt once, in order; before
   * the first event it sends the request again with the same `requestId`, which attaches to a run
   * that started. When the attempt is lost (`RunAttemptLost`: its server crashed or was stopped
   * past its lease) it sends its request again (same `requestId`): the next attempt's events
   * follow, from its `runStarted`. Giving up (`RECONNECT_RETRIES` in a row), it throws the last
   * error. `timeoutMs` bounds the whole stream, reconnects included.
   *
   * With `reconnect: false` nothing is retried: after a transport error, send the same request
   * again with `requestId: stream.requestId` (a finished run is replayed, a running one attached to
   * from its first event), or `joinRun` from `stream.lastSequence`. Errors are thrown while
   * iterating: e.g. `ThreadBusy`, `ThreadQueueFull`, `RevisionConflict`, `ThreadNotSuspended`,
   * `RequestIdReused`, or a `DEFERRED_*` reason for the answers.
   *
   * With `busyStrategy: "enqueue"` (or `"interrupt"`, which also stops the running turn, or
   * `"rollback"`, which also discards it) on a busy
   * thread the request waits in the thread's queue: the stream yields nothing until it starts (within `timeoutMs`), then its attempt from `runStarted`.
   *
   * @throws TypeError at once when `input` has both `text` and `parts`, or an unknown `busyStrategy`.
   */
  stream(threadId: string, input: ThreadRunInput = {}): ThreadRunStream {
    const spec = runSpec(threadId, input);
    const { reconnect = true } = input;
    const maxEventsPerMessage = this.#maxEventsPerMessage;
    const calls = this.#runCalls(threadId, input);
    const send = () =>
      calls.open(
        (callOptions) => this.service.streamThreadRun({ spec, maxEventsPerMessage }, callOptions),
        "StreamThreadRunResponse.event or .events",
      );
    const reopen: Reopen = (lost, at) => (lost === undefined && at !== undefined ? calls.join({ runId: at.runId, afterSequence: at.sequence }) : send());
    return new ThreadRunStream(threadId, spec.requestId, (accept) => follow(send(), reconnect ? reopen : undefined, accept, input.signal));
  }

  /**
   * Follow one attempt of a thread run (`JoinThreadRun`): the events it already wrote, then each
   * new one as it is written, no gap and no repeat, ending as the run does (its `result`, or the
   * run's own error). A finished run in retention is replayed the same way; a queued request (by
   * its `requestId`, or the `runId` it was queued with) yields nothing until it starts. The events
   * are those `stream` yields, with the same sequences and contents, read the same way.
   *
   * ```ts
   * const joined = client.threads.joinRun(threadId, { runId }); // or { requestId }; neither: the running one, else the latest
   * for await (const event of joined) { ... }
   * const rest = client.threads.joinRun(threadId, { runId, afterSequence: 41n }); // the events after 41
   * ```
   *
   * It reconnects by itself unless `reconnect: false`: after a transport failure it joins again
   * from the last sequence it yielded. Joined by `requestId`, when the attempt is lost
   * (`RunAttemptLost`) it follows the request's next attempt once one runs, from that attempt's
   * first event (a new `runId`), waiting for one up to `RECONNECT_RETRIES` times (200 ms,
   * doubling); joined by `runId` only, or when the error says the request was closed (its
   * `requestStatus` not RUNNING: cancelled or interrupted without that attempt's result), a lost
   * attempt ends it with the error.
   *
   * Other ends: `RunEventsExpired` (the log is past its retention or was never recorded: a retry of
   * its request replays the result), `RunNotFound`, `ThreadNotFound`, `FollowerLimitReached`, and
   * `Code.Unimplemented` from a server started with `--event-log off`.
   */
  joinRun(threadId: string, options: JoinRunOptions = {}): ThreadRunStream {
    const { runId = "", requestId = "", afterSequence, reconnect = true } = options;
    const calls = this.#runCalls(threadId, options);
    const first = () => calls.join({ runId, requestId, afterSequence: afterSequence === undefined ? undefined : BigInt(afterSequence) });
    const reopen: Reopen = (lost, at) => {
      if (lost === undefined) {
        return at !== undefined ? calls.join({ runId: at.runId, afterSequence: at.sequence }) : first();
      }
      if (requestId === "" || !requestMayGoOn(lost.requestStatus)) {
        return undefined; // joined by run ID only, or the request was closed: no next attempt comes
      }
      // The next attempt once one runs; until then the request's latest, the lost one again (whose
      // events are not yielded twice).
      return calls.join({ runId: lost.nextRunId, requestId });
    };
    return new ThreadRunStream(threadId, requestId, (accept) => follow(first(), reconnect ? reopen : undefined, accept, options.signal));
  }

  /**
   * Watch a thread (`WatchThread`): first a snapshot (`changes` = `[ThreadChange.SNAPSHOT]`), then
   * one update per change of what `Thread` shows (`COMMITTED`, `RUN_STARTED`, `RUN_ENDED`,
   * `ROLLED_BACK`, `QUEUE`, `LEASE_EXPIRED`; several in one when a slow reader's changes merged).
   *
   * ```ts
   * for await (const { thread, changeSequence, changes } of client.threads.watchThread(threadId)) { ... }
   * ```
   *
   * After a transport failure it reconnects (unless `reconnect: false`, up to `RECONNECT_RETRIES`
   * times in a row) and yields the new snapshot. Leaving the loop ends the call.
   *
   * @throws ThreadNotFound when the thread is deleted (or does not exist); `FollowerLimitReached`;
   *   `Code.Canceled` when `signal` aborts; the transport's error after the last retry.
   */
  async *watchThread(threadId: string, options: WatchThreadOptions = {}): AsyncGenerator<ThreadUpdate, void, undefined> {
    const { reconnect = true, ...rest } = options;
    let failures = 0;
    for (;;) {
      try {
        for await (const update of serverStream((callOptions) => this.service.watchThread({ threadId }, callOptions), connectOptions(rest, 0))) {
          failures = 0;
          yield update;
        }
        return; // the server ended the watch (not a conforming server's way)
      } catch (err) {
        const error = ThreadlineError.from(err);
        if (!reconnect || !retryable(error, rest.signal) || ++failures > RECONNECT_RETRIES) {
          throw error;
        }
        await backoff(failures, rest.signal);
      }
    }
  }

  /**
   * Run the thread's next turn and return its outcome (`RunThread`).
   *
   * UNAVAILABLE (the server unreachable, `STORE_UNAVAILABLE`) and transport failures (the
   * connection lost before the answer, also when that ends the call with `Code.Canceled` without
   * the caller's `signal`) are retried up to `RUN_RETRIES` times, 200 ms apart and
   * doubling, with the same request ID, so the run happens at most once; `replayed` says the
   * server answered it from its record. `timeoutMs` bounds the whole call, retries included.
   * With `busyStrategy: "enqueue"` (or `"interrupt"`, which also stops the running turn, or
   * `"rollback"`, which also discards it) on a busy
   * thread it waits in the thread's queue for its turn, within `timeoutMs` (a deadline ends the call, not the request: it stays queued and runs).
   *
   * @throws TypeError when `input` has both `text` and `parts`, or an unknown `busyStrategy`;
   *   `ThreadlineError` e.g. `ThreadBusy`, `ThreadQueueFull`, `RevisionConflict`,
   *   `ThreadNotSuspended`, `RequestIdReused`, `RequestInterrupted`, `LeaseLost`; the last failure
   *   once retries run out.
   */
  async run(threadId: string, input: ThreadRunInput = {}): Promise<ThreadRunOutcome> {
    const spec = runSpec(threadId, input);
    const response = await this.#retrying(input, this.#runTimeoutMs, (callOptions) => this.service.runThread({ spec }, callOptions));
    const result = required(response.result, "RunThreadResponse.result");
    return { result, revision: response.revision, replayed: response.replayed };
  }

  /**
   * Start the thread's next turn in the background (`StartThreadRun`) and return once the run holds
   * the thread, with no client: the server drives it to its end (a next attempt of its own if its
   * server is lost). `StartedRun` answers RUNNING with its `runId`, `requestId` and `revision` (the
   * head it began from); follow it with `events()`, wait for it with `result()`, stop it with
   * `cancel()`. With `busyStrategy: "enqueue"` on a busy thread it answers at once QUEUED, with its
   * `queuePosition` (1 = next) and the `runId` its first attempt will take; the server starts it in
   * its turn. With `"interrupt"` it answers QUEUED too, ahead of the enqueued requests, and the
   * running turn is asked to stop (it ends CANCELLED); with `"rollback"` likewise, and that turn's
   * commits are discarded before it runs. On a free thread it runs at once.
   *
   * ```ts
   * const started = await client.threads.startRun(threadId, { text: "summarise the logs", requestId: "job-7" });
   * const { result, revision } = await started.result();
   * ```
   *
   * The same `requestId` (and input) again answers the same request: QUEUED while it waits, RUNNING
   * while it runs (`runId` of its current attempt), then `replayed` with its `status` and `outcome`
   * (CANCELLED for a request cancelled in the queue). UNAVAILABLE
   * and transport failures are retried as `run` retries them, with the same request ID;
   * `timeoutMs` (default the client's unary `timeoutMs`) bounds the start, not the run.
   *
   * @throws TypeError when `input` has both `text` and `parts`, or an unknown `busyStrategy`;
   *   `ThreadlineError` as `run` throws before a run: e.g. `ThreadBusy`, `ThreadQueueFull`,
   *   `RevisionConflict`, `ThreadNotSuspended`, `RequestIdReused`, `ThreadNotFound`; for a finished request that ended with an error status,
   *   that status again (`RequestInterrupted`, …).
   */
  async startRun(threadId: string, input: StartRunInput = {}): Promise<StartedRun> {
    const spec = runSpec(threadId, input);
    const start = (options: CallOptions) =>
      this.#retrying(options, this.#unaryTimeoutMs, (callOptions) => this.service.startThreadRun({ spec }, callOptions));
    const response = await start(input);
    return new StartedRun({ threads: this, threadId, response, start, runTimeoutMs: this.#runTimeoutMs });
  }

  /**
   * One request sent until it is answered: UNAVAILABLE and transport failures retried up to
   * `RUN_RETRIES` times, 200 ms apart and doubling, within `options.timeoutMs` (default
   * `defaultTimeoutMs`) for the whole; each attempt gets what is left of it.
   */
  async #retrying<T>(options: CallOptions, defaultTimeoutMs: number, send: (callOptions: ConnectCallOptions) => Promise<T>): Promise<T> {
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
    for (let attempt = 0; ; attempt++) {
      // Each attempt gets what is left of the call's deadline (at least 1 ms: 0 would mean none).
      const left = deadline === undefined ? 0 : Math.max(1, deadline - Date.now());
      try {
        return await call(send(connectOptions({ ...options, timeoutMs: left }, 0)));
      } catch (err) {
        const error = ThreadlineError.from(err);
        const backoff = RETRY_BACKOFF_MS * 2 ** attempt;
        if (
          !retryable(error, options.signal) ||
          attempt === RUN_RETRIES ||
          options.signal?.aborted === true ||
          (deadline !== undefined && deadline - Date.now() <= backoff)
        ) {
          throw error;
        }
        await call(sleep(backoff, options.signal));
      }
    }
  }

  /**
   * Ask a thread's run to stop; it ends CANCELLED with its progress committed. Returns as soon as
   * the server recorded the request, before the run ends: RUNNING while the run stops, CANCELLED
   * when its server was gone and the record was closed at once, or when the request was still
   * queued (taken out of `Thread.queue`: it never runs), or the status of a run that had ended.
   *
   * @param runId - The run (`RunEvent.runId`, `Thread.lease.runId`, `ThreadBusy.runId`,
   *   `QueuedRun.runId`, `StartedRun.runId`).
   * @throws RunNotFound when the thread never had this run.
   */
  async cancel(threadId: string, runId: string, options: CallOptions = {}): Promise<ThreadRunStatus> {
    const response = await call(this.service.cancelThreadRun({ threadId, runId }, this.#unary(options)));
    return response.status;
  }

  /**
   * Ask the run of a request to stop, named by the request's ID (its latest attempt): for a host that
   * knows only the `requestId` it sent (its stream broke before `run_started`). Answers as `cancel`.
   *
   * @param requestId - The request (`ThreadRunInput.requestId`, `StartedRun.requestId`, `QueuedRun.requestId`).
   * @throws RunNotFound when the thread never had this request.
   */
  async cancelRequest(threadId: string, requestId: string, options: CallOptions = {}): Promise<ThreadRunStatus> {
    const response = await call(this.service.cancelThreadRun({ threadId, requestId }, this.#unary(options)));
    return response.status;
  }

  #unary(options: CallOptions) {
    return connectOptions(options, this.#unaryTimeoutMs);
  }

  /**
   * The calls of one thread run stream: each opened with what is left of the stream's deadline
   * (`options.timeoutMs`, default the client's `runTimeoutMs`), so reconnects stay within it.
   */
  #runCalls(threadId: string, options: CallOptions) {
    const timeoutMs = options.timeoutMs ?? this.#runTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
    const maxEventsPerMessage = this.#maxEventsPerMessage;
    const open = (start: (callOptions: ConnectCallOptions) => AsyncIterable<PackedEvents>, what: string) => {
      const left = deadline === undefined ? 0 : Math.max(1, deadline - Date.now());
      return streamEvents(start, connectOptions({ ...options, timeoutMs: left }, 0), what);
    };
    const join = (request: Partial<Pick<JoinThreadRunRequest, "runId" | "requestId" | "afterSequence">>) =>
      open(
        (callOptions) => this.service.joinThreadRun({ threadId, maxEventsPerMessage, ...request }, callOptions),
        "JoinThreadRunResponse.event or .events",
      );
    return { open, join };
  }
}

/** Where a thread run stream stands: the attempt of its last event and that event's sequence. */
interface Position {
  readonly runId: string;
  readonly sequence: bigint;
}

/**
 * How a thread run stream opens again: after a transport failure (`lost` undefined; `at` where it
 * stands, undefined before its first event), or after its attempt was lost. Undefined: it cannot.
 */
type Reopen = (lost: RunAttemptLost | undefined, at: Position | undefined) => AsyncGenerator<RunEvent, void, undefined> | undefined;

/**
 * The events of a thread run stream across its calls: `events` first, then, after an error a
 * reconnect cures, what `reopen` opens, each event once (an event of the same attempt at or below
 * the last sequence yielded is dropped) and seen by `accept` before it is yielded.
 */
async function* follow(
  events: AsyncGenerator<RunEvent, void, undefined>,
  reopen: Reopen | undefined,
  accept: (event: RunEvent) => void,
  signal: AbortSignal | undefined,
): AsyncGenerator<RunEvent, void, undefined> {
  let at: Position | undefined;
  let failures = 0; // reconnects since the last event
  let lost = 0; // lost attempts followed since the last new attempt
  for (;;) {
    try {
      for await (const event of events) {
        if (at !== undefined && event.runId === at.runId && event.sequence <= at.sequence) {
          continue; // already yielded
        }
        if (event.runId !== at?.runId) {
          lost = 0; // the first event, or the first of a next attempt
        }
        at = { runId: event.runId, sequence: event.sequence };
        failures = 0;
        accept(event);
        yield event;
      }
      return;
    } catch (err) {
      const error = ThreadlineError.from(err);
      let next: AsyncGenerator<RunEvent, void, undefined> | undefined;
      if (reopen !== undefined && error instanceof RunAttemptLost && ++lost <= RECONNECT_RETRIES) {
        await backoff(lost, signal);
        next = reopen(error, at);
      } else if (reopen !== undefined && (retryable(error, signal) || error instanceof ListenerTooSlow) && ++failures <= RECONNECT_RETRIES) {
        await backoff(failures, signal);
        next = reopen(undefined, at);
      }
      if (next === undefined) {
        throw error;
      }
      events = next;
    }
  }
}

/** Whether a request whose attempt was lost may still get a next one: RUNNING, or not said (UNSPECIFIED). */
function requestMayGoOn(status: ThreadRunStatus): boolean {
  return status === ThreadRunStatus.RUNNING || status === ThreadRunStatus.UNSPECIFIED;
}

/** Wait before the `attempt`th retry (from 1): 200 ms, doubling; `Code.Canceled` when `signal` aborts. */
async function backoff(attempt: number, signal: AbortSignal | undefined): Promise<void> {
  await call(sleep(RETRY_BACKOFF_MS * 2 ** (attempt - 1), signal));
}

/** The `ThreadRunSpec` of a run request, with a fresh request ID unless the caller gave one. */
function runSpec(threadId: string, input: ThreadRunInput): ThreadRunSpec {
  const { text, parts, answers, requestId, expectedRevision = 0n, toolRecovery, clientTools = [], usageLimits, busyStrategy } = input;
  if (text !== undefined && parts !== undefined) {
    throw new TypeError("give the prompt as text or as parts, not both");
  }
  if (busyStrategy !== undefined && !Object.hasOwn(BUSY_STRATEGIES, busyStrategy)) {
    throw new TypeError(`busyStrategy must be "reject", "enqueue", "interrupt" or "rollback", not ${JSON.stringify(busyStrategy)}`);
  }
  return create(ThreadRunSpecSchema, {
    threadId,
    requestId: requestId || newRequestId(),
    expectedRevision: BigInt(expectedRevision),
    prompt:
      text !== undefined
        ? { case: "text", value: text }
        : parts !== undefined
          ? { case: "parts", value: parts }
          : undefined,
    answers,
    toolRecovery,
    clientTools,
    usageLimits,
    busyStrategy: busyStrategy === undefined ? BusyStrategy.UNSPECIFIED : BUSY_STRATEGIES[busyStrategy],
  });
}

/**
 * Whether `run` may send a request again: UNAVAILABLE, or a transport failure (no status from the
 * server: the connection broke before the answer). Safe because the retry carries the same
 * request ID: the server runs it at most once.
 */
function retryable(error: ThreadlineError, signal: AbortSignal | undefined): boolean {
  if (error.code === Code.Unavailable) {
    return true;
  }
  if (error.reason !== "") {
    return false;
  }
  // A connection that closes under a call resets its stream with CANCEL, which Connect reports as
  // Code.Canceled; it is a transport failure unless the caller aborted.
  if (error.code === Code.Canceled) {
    return signal?.aborted !== true;
  }
  // Connect keeps the Node error (ECONNRESET, ERR_HTTP2_…) as the cause of a transport failure.
  const origin: unknown = error.cause.cause;
  return origin instanceof Error && typeof (origin as { code?: unknown }).code === "string";
}

function labelList(labels: Record<string, string>): string[] {
  return Object.entries(labels).map(([key, value]) => `${key}=${value}`);
}

/**
 * Wait `ms`, or reject with an `AbortError` (its `cause` the signal's reason) once `signal` aborts,
 * as Node's `timers/promises` does, in Node and browsers alike.
 */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  const aborted = () => Object.assign(new Error("The operation was aborted", { cause: signal?.reason }), { name: "AbortError" });
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    const done = () => {
      signal?.removeEventListener("abort", abort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}
