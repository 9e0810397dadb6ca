/**
 * What every call of the SDK shares, for `HarnessService` and `ThreadService` alike: call options
 * with the client's default deadline, error conversion, required response fields, and the reading
 * of a streamed run (packed responses unpacked, early exits cancelling the call).
 *
 * Not public: `client.ts` and `threads.ts` use it.
 *
 * @module
 */

import { Code, ConnectError } from "@connectrpc/connect";
import type { CallOptions as ConnectCallOptions } from "@connectrpc/connect";

import { ProtocolError, ThreadlineError } from "./errors.js";
import type { RunEvent } from "./gen/threadline/v1/events_pb.js";

/** Options of a single call. */
export interface CallOptions {
  /** Abort the call; the SDK then throws a `ThreadlineError` with `Code.Canceled`. */
  signal?: AbortSignal;
  /** This call's deadline in ms, replacing the client's default; 0 = none. */
  timeoutMs?: number;
  /** Extra request headers (gRPC metadata). */
  headers?: ConnectCallOptions["headers"];
}

/** The message of the `ProtocolError` for a stream that ended without its terminal result. */
export const STREAM_WITHOUT_RESULT = "the stream ended without its terminal result";

/** One response of a streamed run: one event (packing off), or one or more (packing on). */
export interface PackedEvents {
  event?: RunEvent | undefined;
  events: RunEvent[];
}

/** The Connect options of a call: the caller's, with `defaultTimeoutMs` unless it chose one. */
export function connectOptions(options: CallOptions | undefined, defaultTimeoutMs: number): ConnectCallOptions {
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

/** Await a call, turning whatever it throws into a `ThreadlineError`. */
export async function call<T>(promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (err) {
    throw ThreadlineError.from(err);
  }
}

/** `value`, or a `ProtocolError` naming the field the contract says the response carries. */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) {
    throw missing(what);
  }
  return value;
}

/** The error for a response that lacks what the contract says it carries. */
export function missing(what: string): ProtocolError {
  return new ProtocolError(`the server's response has no ${what}`);
}

/**
 * The events of a streamed run, one at a time, in order; the stream must end with a `result`.
 *
 * @param open - Start the call with the given signal (ours, which follows the caller's).
 * @param options - The call's Connect options; its `signal` is followed, not passed on.
 * @param what - The response's fields, for the `ProtocolError` of a response without events.
 * @param accept - Sees (and may complete or refuse, by throwing) each event before it is yielded.
 */
export async function* streamEvents(
  open: (options: ConnectCallOptions) => AsyncIterable<PackedEvents>,
  options: ConnectCallOptions,
  what: string,
  accept: (event: RunEvent) => void = () => {},
): AsyncGenerator<RunEvent, void, undefined> {
  // Connect's stream iterator has no `return()`, so leaving the loop early would leave the call
  // open (and its deadline timer keeping the process alive). So when the caller stops reading
  // (`break`, `return`, an exception in its loop body), `finally` aborts our own signal, which
  // cancels the RPC, and reads the stream to its end so Connect cleans up.
  const controller = new AbortController();
  const { signal } = options;
  const forward = () => controller.abort(signal?.reason);
  if (signal?.aborted) {
    forward();
  } else {
    signal?.addEventListener("abort", forward, { once: true });
  }
  const responses = open({ ...options, signal: controller.signal })[Symbol.asyncIterator]();
  let finished = false;
  let sawResult = false;
  try {
    for (;;) {
      let next: IteratorResult<PackedEvents>;
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
      const { event, events } = next.value;
      const received = event !== undefined ? [event] : events;
      if (received.length === 0) {
        // A broken contract: `finally` cancels the call like any other early exit.
        throw missing(what);
      }
      for (const item of received) {
        // Once the caller aborts, it gets no more events: not the rest of a packed response, nor
        // responses Connect has already buffered (it would hand those out before it noticed).
        if (controller.signal.aborted) {
          throw ThreadlineError.from(ConnectError.from(controller.signal.reason, Code.Canceled));
        }
        accept(item);
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

/**
 * The messages of a server-streaming call, in order, its errors as `ThreadlineError`s; leaving the
 * loop early cancels the call (as `streamEvents` does).
 *
 * @param open - Start the call with the given options (whose signal is ours, following the caller's).
 * @param options - The call's Connect options; its `signal` is followed, not passed on.
 */
export async function* serverStream<T>(
  open: (options: ConnectCallOptions) => AsyncIterable<T>,
  options: ConnectCallOptions,
): AsyncGenerator<T, void, undefined> {
  const controller = new AbortController();
  const { signal } = options;
  const forward = () => controller.abort(signal?.reason);
  if (signal?.aborted) {
    forward();
  } else {
    signal?.addEventListener("abort", forward, { once: true });
  }
  const responses = open({ ...options, signal: controller.signal })[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      let next: IteratorResult<T>;
      try {
        next = await responses.next();
      } catch (err) {
        finished = true;
        throw ThreadlineError.from(err);
      }
      if (next.done === true) {
        finished = true;
        return;
      }
      if (controller.signal.aborted) {
        throw ThreadlineError.from(ConnectError.from(controller.signal.reason, Code.Canceled));
      }
      yield next.value;
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
