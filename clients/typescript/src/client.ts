/**
 * The Threadline client: `threadline.v1.HarnessService` over gRPC (HTTP/2), with Connect-ES.
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
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { CallOptions as ConnectCallOptions, Client, Interceptor } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";

import { CandidateHistories } from "./checkpoints.js";
import { ProtocolError, ThreadlineError } from "./errors.js";
import type { DeferredToolResume } from "./gen/threadline/v1/deferred_pb.js";
import type { RunEvent } from "./gen/threadline/v1/events_pb.js";
import {
  type GetServerInfoResponse,
  HarnessService,
  type NewStateRequestSchema,
  type StreamRunResponse,
} from "./gen/threadline/v1/harness_service_pb.js";
import { CheckpointForm, type RunResult, type RunSpec, RunSpecSchema } from "./gen/threadline/v1/run_pb.js";
import type { HarnessState } from "./gen/threadline/v1/state_pb.js";

/** The deadline of a unary call (everything but `run` and `streamRun`) unless one is given. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** The deadline of `run` and `streamRun` unless one is given. */
export const DEFAULT_RUN_TIMEOUT_MS = 10 * 60_000;
/** How many events one `streamRun` response may carry unless the client says otherwise. */
export const DEFAULT_MAX_EVENTS_PER_MESSAGE = 64;

/** The largest value the contract's `uint32 max_events_per_message` can carry. */
const MAX_UINT32 = 0xffff_ffff;

/** The message of the `ProtocolError` for a stream that ended without its terminal result. */
const STREAM_WITHOUT_RESULT = "the stream ended without its terminal result";

/** How to reach the server. */
export interface ThreadlineClientOptions {
  /** The server's address: `http://127.0.0.1:50051`, or just `127.0.0.1:50051` (plain HTTP/2). */
  baseUrl: string;
  /** A bearer token, sent as `authorization: Bearer <token>` on every call (server `--token`). */
  token?: string;
  /** The default deadline of unary calls in ms (default `DEFAULT_TIMEOUT_MS`); 0 = none. */
  timeoutMs?: number;
  /** The default deadline of `run` and `streamRun` in ms (default `DEFAULT_RUN_TIMEOUT_MS`); 0 = none. */
  runTimeoutMs?: number;
  /** Extra Connect interceptors, run after the one that adds the token. */
  interceptors?: Interceptor[];
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

/** Options of a single call. */
export interface CallOptions {
  /** Abort the call; the SDK then throws a `ThreadlineError` with `Code.Canceled`. */
  signal?: AbortSignal;
  /** This call's deadline in ms, replacing the client's default; 0 = none. */
  timeoutMs?: number;
  /** Extra request headers (gRPC metadata). */
  headers?: ConnectCallOptions["headers"];
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
  /** What the server supports: state versions, history formats, agents and their tools, limits. */
  getServerInfo(options?: CallOptions): Promise<GetServerInfoResponse>;
  /** The generated Connect client, for anything the SDK does not wrap (errors are not converted). */
  readonly service: Client<typeof HarnessService>;
  /** Close the HTTP/2 connection; open calls end with `Code.Canceled`. */
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
  const sessionManager = new Http2SessionManager(baseUrl);
  const interceptors: Interceptor[] = [];
  if (options.token !== undefined && options.token !== "") {
    const authorization = `Bearer ${options.token}`;
    interceptors.push((next) => (request) => {
      request.header.set("authorization", authorization);
      return next(request);
    });
  }
  interceptors.push(...(options.interceptors ?? []));
  const transport = createGrpcTransport({ baseUrl, sessionManager, interceptors });
  const service = createClient(HarnessService, transport);
  const unaryTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const runTimeout = options.runTimeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;

  const unary = (callOptions: CallOptions | undefined) => connectOptions(callOptions, unaryTimeout);

  return {
    service,

    streamRun(spec, callOptions) {
      return streamEvents(service, toStreamRunSpec(spec), maxEventsPerMessage, connectOptions(callOptions, runTimeout));
    },

    async run(spec, callOptions) {
      const response = await call(service.run({ spec: toRunSpec(spec) }, connectOptions(callOptions, runTimeout)));
      return required(response.result, "RunResponse.result");
    },

    async newState(request = {}, callOptions) {
      const response = await call(service.newState(request, unary(callOptions)));
      return required(response.state, "NewStateResponse.state");
    },

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
      sessionManager.abort();
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

async function* streamEvents(
  service: Client<typeof HarnessService>,
  spec: RunSpec,
  maxEventsPerMessage: number,
  options: ConnectCallOptions,
): AsyncGenerator<RunEvent, void, undefined> {
  // Connect's stream iterator has no `return()`, so leaving the loop early would leave the run
  // going on the server (and the call's deadline timer keeping the process alive). So when the
  // caller stops reading (`break`, `return`, an exception in its loop body), `finally` aborts our
  // own signal, which cancels the RPC and so the run, and reads the stream to its end so Connect
  // cleans up.
  const controller = new AbortController();
  const { signal } = options;
  const forward = () => controller.abort(signal?.reason);
  if (signal?.aborted) {
    forward();
  } else {
    signal?.addEventListener("abort", forward, { once: true });
  }
  // Read the first candidate's base now, as the request is about to carry it.
  const histories = new CandidateHistories(spec);
  const responses = service
    .streamRun({ spec, maxEventsPerMessage }, { ...options, signal: controller.signal })
    [Symbol.asyncIterator]();
  let finished = false;
  let sawResult = false;
  try {
    for (;;) {
      let next: IteratorResult<StreamRunResponse>;
      try {
        next = await responses.next();
      } catch (err) {
        finished = true;
        throw ThreadlineError.from(err);
      }
      if (next.done === true) {
        finished = true;
        if (!sawResult) {
          throw new ProtocolError(STREAM_WITHOUT_RESULT);
        }
        return;
      }
      // One event in `event` (packing off), or one or more in `events` (packing on).
      const { event, events } = next.value;
      const received = event !== undefined ? [event] : events;
      if (received.length === 0) {
        // A broken contract: `finally` cancels the run like any other early exit.
        throw missing("StreamRunResponse.event or .events");
      }
      for (const item of received) {
        // Once the caller aborts, it gets no more events: not the rest of a packed response, nor
        // responses Connect has already buffered (it would hand those out before it noticed).
        if (controller.signal.aborted) {
          throw ThreadlineError.from(ConnectError.from(controller.signal.reason, Code.Canceled));
        }
        // A candidate that does not rebuild throws, and `finally` cancels the run.
        histories.complete(item);
        sawResult ||= item.event.case === "result";
        yield item;
      }
    }
  } finally {
    signal?.removeEventListener("abort", forward);
    if (!finished) {
      controller.abort();
      try {
        while ((await responses.next()).done !== true) {
          // Discard what was already in flight.
        }
      } catch {
        // The cancellation we just caused.
      }
    }
  }
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

function connectOptions(options: CallOptions | undefined, defaultTimeoutMs: number): ConnectCallOptions {
  const timeoutMs = options?.timeoutMs ?? defaultTimeoutMs;
  const result: ConnectCallOptions = {};
  if (timeoutMs > 0) {
    result.timeoutMs = timeoutMs;
  }
  if (options?.signal !== undefined) {
    result.signal = options.signal;
  }
  if (options?.headers !== undefined) {
    result.headers = options.headers;
  }
  return result;
}

async function call<T>(promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (err) {
    throw ThreadlineError.from(err);
  }
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) {
    throw missing(what);
  }
  return value;
}

/** The error for a response that lacks what the contract says it carries. */
function missing(what: string): ProtocolError {
  return new ProtocolError(`the server's response has no ${what}`);
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
