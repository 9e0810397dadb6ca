/**
 * Host-managed children (CHILDREN §4): a parent run that delegates to a Host-managed child
 * suspends with a pending external call whose `child` (`ChildRequest`) says what to run. The host
 * runs the child as an ordinary thread of its own and answers the parent's call with the child's
 * outcome.
 *
 * ```ts
 * for (const { child } of pendingChildren(parent.deferred)) {
 *   let result = await client.runChild(child);          // NewState(child.threadId), then a run
 *   while (result.status === RunStatus.SUSPENDED) {      // the child asks the host, like any thread
 *     const deferredResume = resumeWith(result.deferred!, askTheUser(result.deferred!));
 *     result = await client.runChild(child, { previousState: result.state, deferredResume });
 *   }
 *   answered.push(childAnswer(child, result));
 * }
 * ```
 *
 * A thin layer over `newState`, `run`/`streamRun` and `callResult`/`callFailed`: it keeps nothing,
 * so the host persists each child result (and the parent ↔ child link, by the child's thread ID)
 * itself. `childRunInput` and `childState` are the client's (`runChild`, `streamChild`), not
 * re-exported.
 *
 * @module
 */

import type { RunInput } from "./client.js";
import type { AnswerOptions } from "./deferred.js";
import { callFailed, callResult } from "./deferred.js";
import type { CallResult, ChildRequest, DeferredToolCall, DeferredToolRequests } from "./gen/threadline/v1/deferred_pb.js";
import { ChildAction } from "./gen/threadline/v1/deferred_pb.js";
import { type RunResult, RunStatus } from "./gen/threadline/v1/run_pb.js";
import type { HarnessState } from "./gen/threadline/v1/state_pb.js";

/**
 * A run of a child: a `RunInput` whose agent, prompt and lineage come from the request.
 * `previousState` is the child's saved state: its last result's `state` (or a checkpoint), which
 * continuing a child or answering a suspended one needs; without it a CHILD_ACTION_START child
 * starts on a new thread `request.threadId`. With `deferredResume` (the answers to the child's own
 * pending calls) the run sends no prompt.
 */
export type ChildRunInput = Omit<RunInput, "agent" | "prompt" | "lineage">;

/** A child's state, as `RunInput.previousState` takes it. */
type ChildState = NonNullable<RunInput["previousState"]>;

/** A pending call of a suspended parent that asks the host to run a child. */
export interface PendingChild {
  /** The parent's call, as the server sent it; answer it with `childAnswer`. */
  readonly call: DeferredToolCall;
  /** What to run (`call.child`). */
  readonly child: ChildRequest;
}

/** The child requests among a suspended result's pending calls (`deferred.calls` with `child` set). */
export function pendingChildren(requests: DeferredToolRequests | undefined): PendingChild[] {
  return (requests?.calls ?? []).flatMap((call) => (call.child === undefined ? [] : [{ call, child: call.child }]));
}

/**
 * The answer to the parent's call from the child's terminal result: for a completed child the
 * value `{"execution_id", "subagent", "status": "completed", "output"}`, for a failed or cancelled
 * one the failure "Child <thread id> did not complete successfully (<code>)." (`<code>` is the
 * failure's code, or `child_cancelled`).
 *
 * @throws RangeError when `result` is not the child's (another thread ID) or the child is
 *   suspended: answer the child's own pending calls and run it again first (or answer the parent
 *   with `childRunning` or a failure of your own).
 */
export function childAnswer(request: ChildRequest, result: RunResult, options: AnswerOptions = {}): CallResult {
  if (result.threadId !== request.threadId) {
    throw new RangeError(`the result is of thread ${result.threadId}, not of the child ${request.threadId}`);
  }
  const call = parentCallId(request);
  switch (result.status) {
    case RunStatus.COMPLETED:
      return callResult(
        call,
        { ...childValue(request, "completed"), output: JSON.parse(result.outputJson) as unknown },
        options,
      );
    case RunStatus.FAILED:
    case RunStatus.CANCELLED: {
      const code = result.failure === undefined ? "child_cancelled" : result.failure.code;
      return callFailed(call, `Child ${request.threadId} did not complete successfully (${code}).`, options);
    }
    case RunStatus.SUSPENDED:
      throw new RangeError(`the child ${request.threadId} is suspended: answer its pending calls and run it again first`);
    default:
      throw new RangeError(`the child ${request.threadId} ended with an unknown status (${result.status})`);
  }
}

/**
 * The admission answer `{"execution_id", "subagent", "status": "running"}`: the parent goes on
 * while the child works, and its model sees that status as the call's result.
 */
export function childRunning(request: ChildRequest, options: AnswerOptions = {}): CallResult {
  return callResult(parentCallId(request), childValue(request, "running"), options);
}

/**
 * The `RunInput` of a child run on `state`: agent `request.agent`, lineage `request.parent` (as it
 * is), and prompt `request.input` unless the run answers the child's pending calls.
 */
export function childRunInput(request: ChildRequest, input: ChildRunInput, state: ChildState): RunInput {
  return {
    ...input,
    agent: request.agent,
    previousState: state,
    ...(request.parent && { lineage: request.parent }),
    ...(input.deferredResume === undefined && { prompt: request.input }),
  };
}

/**
 * The child's state to run on: `input.previousState`, else `start()` (the new thread's envelope)
 * for a CHILD_ACTION_START request.
 *
 * @throws RangeError for a CHILD_ACTION_CONTINUE request without the child's saved state.
 */
export async function childState(
  request: ChildRequest,
  input: ChildRunInput,
  start: () => Promise<HarnessState>,
): Promise<ChildState> {
  if (input.previousState !== undefined) {
    return input.previousState;
  }
  if (request.action !== ChildAction.START) {
    throw new RangeError(`continuing the child ${request.threadId} needs its saved state (previousState)`);
  }
  return start();
}

function childValue(request: ChildRequest, status: "completed" | "running"): Record<string, unknown> {
  return { execution_id: request.threadId, subagent: request.subagentName, status };
}

function parentCallId(request: ChildRequest): string {
  const id = request.parent?.parentToolCallId ?? "";
  if (id === "") {
    throw new RangeError(`the child request ${request.threadId} names no parent tool call (parent.parentToolCallId)`);
  }
  return id;
}
