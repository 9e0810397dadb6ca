/**
 * The Threadline client: `threadline.v1.HarnessService` over gRPC (HTTP/2), with Connect-ES, and
 * `client.threads` for `threadline.v1.ThreadService` on the same connection (`threads.ts`). In a
 * browser the same client speaks Connect to the server's HTTP port (`transport/browser.ts`).
 *
 * ```ts
 * const client = createThreadlineClient({ baseUrl: "http://127.0.0.1:50051" });
 * for await (const event of client.streamRun({ prompt: "hello" }, { timeoutMs: 60_000 })) {
 *   if (event.event.case === "result") persist(event.event.value.state);
 * }
 * client.close();
 * ```
 *
 * Every method takes an options object last (`signal`, `timeoutMs`, `headers`) and rejects with a
 * `ThreadlineError` (a `ProtocolError` when the server's answer breaks the contract). Nothing
 * waits forever by default: unary calls get `DEFAULT_TIMEOUT_MS` and runs `DEFAULT_RUN_TIMEOUT_MS`
 * unless the client or the call says otherwise.
 *
 * @module
 */

import { create } from "@bufbuild/protobuf";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import type { Client, Interceptor, Transport } from "@connectrpc/connect";
import { defaultTransport } from "#transport";

import { type CallOptions, STREAM_WITHOUT_RESULT, call, connectOptions, required, streamEvents } from "./calls.js";
import { CandidateHistories } from "./checkpoints.js";
import { type ChildRunInput, childRunInput, childState } from "./children.js";
import { ProtocolError } from "./errors.js";
import type { ChildRequest, DeferredToolResume } from "./gen/threadline/v1/deferred_pb.js";
import type { RunEvent } from "./gen/threadline/v1/events_pb.js";
import {
  type GetServerInfoResponse,
  HarnessService,
  type NewStateRequestSchema,
} from "./gen/threadline/v1/harness_service_pb.js";
import { CheckpointForm, type RunResult, type RunSpec, RunSpecSchema } from "./gen/threadline/v1/run_pb.js";
import type { HarnessState } from "./gen/threadline/v1/state_pb.js";
import { ThreadService } from "./gen/threadline/v1/thread_service_pb.js";
import { Threads } from "./threads.js";
import { traceContextInterceptor } from "./tracing.js";

export type { CallOptions } from "./calls.js";

/** The deadline of a unary call (everything but `run` and `streamRun`) unless one is given. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** The deadline of `run` and `streamRun` unless one is given. */
export const DEFAULT_RUN_TIMEOUT_MS = 10 * 60_000;
/** How many events one `streamRun` response may carry unless the client says otherwise. */
export const DEFAULT_MAX_EVENTS_PER_MESSAGE = 64;

/** The largest value the contract's `uint32 max_events_per_message` can carry. */
const MAX_UINT32 = 0xffff_ffff;

/** How to reach the server. */
export interface ThreadlineClientOptions {
  /**
   * The server's address: `http://127.0.0.1:50051`, or just `127.0.0.1:50051` (plain HTTP/2); in a
   * browser, the HTTP port's, e.g. `http://127.0.0.1:8080`.
   */
  baseUrl: string;
  /** A bearer token, sent as `authorization: Bearer <token>` on every call (server `--token`). */
  token?: string;
  /** The default deadline of unary calls in ms (default `DEFAULT_TIMEOUT_MS`); 0 = none. */
  timeoutMs?: number;
  /** The default deadline of `run` and `streamRun` in ms (default `DEFAULT_RUN_TIMEOUT_MS`); 0 = none. */
  runTimeoutMs?: number;
  /** Extra Connect interceptors, run after the SDK's (the token, the trace context). */
  interceptors?: Interceptor[];
  /**
   * How to reach the server instead of the default: in Node, gRPC over HTTP/2 to the gRPC port; in
   * a browser (a bundler's `browser` condition), Connect over `fetch` to the server's HTTP port
   * (`threadline serve --http-port`). Pass e.g. `createGrpcWebTransport({ baseUrl })` of
   * `@connectrpc/connect-web` for gRPC-Web; `baseUrl` is then only the SDK's default's. The SDK's
   * interceptors (the token, the trace context, `interceptors`) are not added to a transport given
   * here: give them to it.
   */
  transport?: Transport;
  /**
   * How many events one `streamRun` response may carry (default `DEFAULT_MAX_EVENTS_PER_MESSAGE`),
   * sent as `StreamRunRequest.max_events_per_message`. The server packs events that are ready at
   * once into one response and never holds one back, so a fast stream takes fewer messages; the
   * SDK still yields one event at a time. 0 or 1 turns packing off; the server takes at most 256
   * (a larger value means 256). An integer from 0 to 2^32 - 1, else `createThreadlineClient` throws
   * a `RangeError`.
   */
  maxEventsPerMessage?: number;
}

/** What to run: a `RunSpec`, where `prompt` may also be plain text. */
export type RunInput = Omit<MessageInitShape<typeof RunSpecSchema>, "prompt" | "$typeName"> & {
  /** The new user input: text, or the `RunSpec.prompt` oneof. Unset = continue without input. */
  prompt?: string | MessageInitShape<typeof RunSpecSchema>["prompt"];
};

/** The fields of `NewStateRequest`, all optional. */
export type NewStateInput = Omit<MessageInitShape<typeof NewStateRequestSchema>, "$typeName">;

/** A state for `validateState`: an envelope, or the harness state JSON. */
export type StateSource = HarnessState | { stateJson: string };

/** The answer of `validateState`: the state in both stored forms, as the server re-encoded it. */
export interface ValidatedState {
  /** The envelope as the server re-encoded it; store this form. */
  readonly state: HarnessState;
  /** The same state as the harness state JSON (byte-identical for equal states). */
  readonly stateJson: string;
}

/** Options of `forkState`. */
export interface ForkStateOptions extends CallOptions {
  /** The new thread's ID. Default: a server-generated `thread_<32 hex>`. */
  threadId?: string;
}

/** A client of one Threadline server. */
export interface ThreadlineClient {
  /**
   * Run the agent and stream its events, for `for await`. Events come in order; the last one is
   * the terminal `result` (`event.event.case === "result"`). Breaking out of the loop cancels the
   * run. A run that fails before it starts (or whose core fails after) throws `ThreadlineError`;
   * a stream that ends without its `result`, or a response without events, throws `ProtocolError`.
   *
   * With `checkpoints` and no `checkpointForm`, the SDK asks for `CheckpointForm.DELTA` (`spec`
   * itself is not changed) and rebuilds each candidate's history before yielding it, so every
   * `checkpointCandidate` carries a complete state whatever the form; a candidate that does not
   * rebuild to its `sha256` ends the stream (and cancels the run) with a `ProtocolError`.
   */
  streamRun(spec: RunInput, options?: CallOptions): AsyncIterable<RunEvent>;
  /** Run the agent and return only its terminal result. */
  run(spec: RunInput, options?: CallOptions): Promise<RunResult>;
  /**
   * Run a Host-managed child (a suspended parent's `DeferredToolCall.child`, see
   * `pendingChildren`) and return its terminal result: agent `request.agent` with prompt
   * `request.input` and `lineage` `request.parent`, on `input.previousState` (the child's saved
   * state) or, for a CHILD_ACTION_START request without one, on a new thread `request.threadId`
   * (`newState`). A suspended child is answered like any thread: run it again with its state and
   * `deferredResume` (no prompt is sent then). Persist each result; answer the parent with
   * `childAnswer` once the child has ended.
   *
   * @throws RangeError for a CHILD_ACTION_CONTINUE request without `previousState`.
   */
  runChild(request: ChildRequest, input?: ChildRunInput, options?: CallOptions): Promise<RunResult>;
  /** `runChild`, streamed like `streamRun` (e.g. with `checkpoints` to recover the child). */
  streamChild(request: ChildRequest, input?: ChildRunInput, options?: CallOptions): AsyncIterable<RunEvent>;
  /** The envelope of a new thread (e.g. to choose its ID before the first run). */
  newState(request?: NewStateInput, options?: CallOptions): Promise<HarnessState>;
  /** Branch a thread from a checkpoint: a new thread ID with the same history. */
  forkState(state: HarnessState, options?: ForkStateOptions): Promise<HarnessState>;
  /** Validate a state exactly as a run would; an invalid state rejects with a `ThreadlineError`. */
  validateState(source: StateSource, options?: CallOptions): Promise<ValidatedState>;
  /**
   * The part of an accepted resume that `state`'s history has not yet incorporated, or
   * `undefined` when nothing remains.
   */
  remainingDeferred(
    resume: DeferredToolResume,
    state: HarnessState,
    options?: CallOptions,
  ): Promise<DeferredToolResume | undefined>;
  /**
   * What the server supports: state versions, history formats, agents (their tools and shell
   * `mounts`), limits, and the `environmentProviders` whose state versions it reads.
   */
  getServerInfo(options?: CallOptions): Promise<GetServerInfoResponse>;
  /**
   * Durable threads the server keeps (`ThreadService`), on this client's connection, token and
   * default deadlines: the host sends only what is new, by thread ID.
   */
  readonly threads: Threads;
  /** The generated Connect client, for anything the SDK does not wrap (errors are not converted). */
  readonly service: Client<typeof HarnessService>;
  /** Close the HTTP/2 connection (Node's default transport); open calls end with `Code.Canceled`. */
  close(): void;
}

/**
 * Create a client of the server at `baseUrl`. The connection opens on the first call.
 *
 * @throws RangeError when `maxEventsPerMessage` is not an integer from 0 to 2^32 - 1.
 */
export function createThreadlineClient(options: ThreadlineClientOptions): ThreadlineClient {
  const maxEventsPerMessage = checkMaxEventsPerMessage(options.maxEventsPerMessage);
  const baseUrl = normalizeBaseUrl(options.baseUrl);
  const interceptors: Interceptor[] = [];
  if (options.token !== undefined && options.token !== "") {
    const authorization = `Bearer ${options.token}`;
    interceptors.push((next) => (request) => {
      request.header.set("authorization", authorization);
      return next(request);
    });
  }
  // The host's trace context (when `@opentelemetry/api` is there), before the host's own
  // interceptors, which may still change it.
  interceptors.push(traceContextInterceptor, ...(options.interceptors ?? []));
  const opened =
    options.transport === undefined
      ? defaultTransport(baseUrl, interceptors)
      : { transport: options.transport, close: () => undefined };
  const transport = opened.transport;
  const service = createClient(HarnessService, transport);
  const unaryTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const runTimeout = options.runTimeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;

  const unary = (callOptions: CallOptions | undefined) => connectOptions(callOptions, unaryTimeout);
  const threads = new Threads({
    service: createClient(ThreadService, transport),
    unaryTimeoutMs: unaryTimeout,
    runTimeoutMs: runTimeout,
    maxEventsPerMessage,
  });

  const newState = async (request: NewStateInput = {}, callOptions?: CallOptions) => {
    const response = await call(service.newState(request, unary(callOptions)));
    return required(response.state, "NewStateResponse.state");
  };

  const childSpec = async (request: ChildRequest, input: ChildRunInput, callOptions: CallOptions | undefined) => {
    // The new thread's envelope on the run's signal and headers, but a unary call's deadline.
    const { signal, headers } = callOptions ?? {};
    const start = () => newState({ threadId: request.threadId }, { signal, headers });
    return childRunInput(request, input, await childState(request, input, start));
  };

  return {
    service,
    threads,

    streamRun(spec, callOptions) {
      const runSpec = toStreamRunSpec(spec);
      // Read the first candidate's base now, as the request is about to carry it.
      const histories = new CandidateHistories(runSpec);
      return streamEvents(
        (options) => service.streamRun({ spec: runSpec, maxEventsPerMessage }, options),
        connectOptions(callOptions, runTimeout),
        "StreamRunResponse.event or .events",
        // A candidate that does not rebuild throws, which cancels the run.
        (event) => histories.complete(event),
      );
    },

    async run(spec, callOptions) {
      const response = await call(service.run({ spec: toRunSpec(spec) }, connectOptions(callOptions, runTimeout)));
      return required(response.result, "RunResponse.result");
    },

    async runChild(request, input = {}, callOptions) {
      return this.run(await childSpec(request, input, callOptions), callOptions);
    },

    async *streamChild(request, input = {}, callOptions) {
      yield* this.streamRun(await childSpec(request, input, callOptions), callOptions);
    },

    newState,

    async forkState(state, callOptions = {}) {
      const { threadId = "", ...rest } = callOptions;
      const response = await call(service.forkState({ state, threadId }, unary(rest)));
      return required(response.state, "ForkStateResponse.state");
    },

    async validateState(source, callOptions) {
      const request =
        "$typeName" in source
          ? { source: { case: "state" as const, value: source } }
          : { source: { case: "stateJson" as const, value: source.stateJson } };
      const response = await call(service.validateState(request, unary(callOptions)));
      return { state: required(response.state, "ValidateStateResponse.state"), stateJson: response.stateJson };
    },

    async remainingDeferred(resume, state, callOptions) {
      const response = await call(service.remainingDeferred({ resume, state }, unary(callOptions)));
      return response.remaining;
    },

    async getServerInfo(callOptions) {
      return call(service.getServerInfo({}, unary(callOptions)));
    },

    close() {
      opened.close();
    },
  };
}

/**
 * Read a whole streamed run: every event in order, and the terminal result.
 *
 * @throws ProtocolError when the stream ends without a result (the server's own error status is
 *   thrown as it is, as a `ThreadlineError`).
 */
export async function collectRun(events: AsyncIterable<RunEvent>): Promise<{ events: RunEvent[]; result: RunResult }> {
  const seen: RunEvent[] = [];
  let result: RunResult | undefined;
  for await (const event of events) {
    seen.push(event);
    if (event.event.case === "result") {
      result = event.event.value;
    }
  }
  if (result === undefined) {
    throw new ProtocolError(STREAM_WITHOUT_RESULT);
  }
  return { events: seen, result };
}

function toRunSpec(input: RunInput): RunSpec {
  const { prompt, ...rest } = input;
  return create(RunSpecSchema, {
    ...rest,
    prompt: typeof prompt === "string" ? { case: "text", value: prompt } : prompt,
  });
}

/**
 * `toRunSpec` for `streamRun`: checkpoints come as CHECKPOINT_FORM_DELTA unless the host chose a
 * form, since the SDK rebuilds them anyway. `toRunSpec` always returns a new object (the spread
 * below), so setting the form leaves the host's own spec as it was.
 */
function toStreamRunSpec(input: RunInput): RunSpec {
  const spec = toRunSpec(input);
  if (spec.checkpoints && spec.checkpointForm === CheckpointForm.UNSPECIFIED) {
    spec.checkpointForm = CheckpointForm.DELTA;
  }
  return spec;
}

function checkMaxEventsPerMessage(value: number | undefined): number {
  if (value === undefined) {
    return DEFAULT_MAX_EVENTS_PER_MESSAGE;
  }
  if (!Number.isInteger(value) || value < 0 || value > MAX_UINT32) {
    const got = typeof value === "number" ? String(value) : JSON.stringify(value);
    throw new RangeError(
      `maxEventsPerMessage must be an integer from 0 to ${MAX_UINT32} (0 or 1 = one event per message), got ${got}`,
    );
  }
  return value;
}

function normalizeBaseUrl(address: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `http://${address}`;
}
