/**
 * Answering a suspended run: one helper per kind of answer, and `resumeWith` to put them together.
 *
 * A run that suspends returns `RunResult.deferred`: approvals to decide and calls (external tools,
 * client tools, questions) to execute. The host answers every item exactly once, in its own
 * category, and sends the batch back unchanged with the answers in the next run's
 * `deferred_resume`:
 *
 * ```ts
 * const resume = resumeWith(result.deferred!, [
 *   approve(result.deferred!.approvals[0]!),
 *   callResult(result.deferred!.calls[0]!, { temperature: 21 }),
 * ]);
 * await client.run({ previousState: result.state, deferredResume: resume, clientTools });
 * ```
 *
 * A thread the server keeps (`client.threads`) is answered without the batch: the server holds it,
 * so `answers(...)` gives only the `DeferredToolResults`, matched to the pending items by call ID:
 *
 * ```ts
 * await client.threads.run(threadId, { answers: answers(approve(thread.pending!.approvals[0]!)) });
 * ```
 *
 * Values given to the helpers are plain JavaScript values; the helpers write them as the JSON
 * text the contract carries (`value_json`, `override_args_json`, `metadata_json`).
 *
 * @module
 */

import { create } from "@bufbuild/protobuf";

import {
  type ApprovalResult,
  ApprovalResultSchema,
  type CallResult,
  CallResultSchema,
  type DeferredToolCall,
  type DeferredToolRequests,
  type DeferredToolResults,
  DeferredToolResultsSchema,
  type DeferredToolResume,
  DeferredToolResumeSchema,
} from "./gen/threadline/v1/deferred_pb.js";

/** A pending call, or just its `tool_call_id`. */
export type CallRef = DeferredToolCall | string;

/** Who answered and what metadata the tool sees; shared by every answer. */
export interface AnswerOptions {
  /** Who answered (a person's ID, a bot or a policy name). The server records it, never checks it. */
  answeredBy?: string;
  /** Metadata the tool sees as its call metadata: a JSON object. */
  metadata?: Record<string, unknown>;
}

/** Options of `approve`. */
export interface ApproveOptions extends AnswerOptions {
  /** Run the call with these arguments (a JSON object) instead of the model's. */
  overrideArgs?: Record<string, unknown>;
}

/** One answer to a pending item: an approval decision or a call result. */
export type Answer = ApprovalResult | CallResult;

/** Approve a call that requires approval; it runs on the server in the next run. */
export function approve(call: CallRef, options: ApproveOptions = {}): ApprovalResult {
  return create(ApprovalResultSchema, {
    toolCallId: callId(call),
    decision: {
      case: "approved",
      value: options.overrideArgs === undefined ? {} : { overrideArgsJson: toJson(options.overrideArgs) },
    },
    ...answerFields(options),
  });
}

/**
 * Deny a call that requires approval; the model sees `message` as the call's result.
 *
 * An empty message means the native default, "The tool call was denied.".
 */
export function deny(call: CallRef, message = "", options: AnswerOptions = {}): ApprovalResult {
  return create(ApprovalResultSchema, {
    toolCallId: callId(call),
    decision: { case: "denied", value: { message } },
    ...answerFields(options),
  });
}

/**
 * The denial a pending approval gets when a prompt without answers continues a SUSPENDED thread and
 * the call is known never to have started: the model sees this text as the call's result (a fixed
 * text of the server's core, LIVE §5.3), so a host can tell such a settled approval from a person's
 * denial. `ThreadNotSuspended.answeredBy.how` is then `"prompt"`.
 */
export const UNANSWERED_APPROVAL_MESSAGE = "Not approved: the thread continued without an answer.";

/**
 * The result of a call known not to have started whose tool is no longer available (a fixed text
 * of the server's core, LIVE §5.4): the model sees it as a failed result instead of the unknown
 * result, which would claim the call may have run.
 */
export const NOT_EXECUTED_TOOL_RESULT = "The tool call was not executed: its tool is no longer available.";

/** The result of a call the host executed (an external or client tool, or a question's answer). */
export function callResult(call: CallRef, value: unknown, options: AnswerOptions = {}): CallResult {
  return create(CallResultSchema, {
    toolCallId: callId(call),
    result: { case: "valueJson", value: toJson(value) },
    ...answerFields(options),
  });
}

/** An alias of `callResult`, named for the external-tool case. */
export const externalResult = callResult;

/** A call the host executed and that failed; the model sees `message` as a failed result. */
export function callFailed(call: CallRef, message: string, options: AnswerOptions = {}): CallResult {
  return create(CallResultSchema, {
    toolCallId: callId(call),
    result: { case: "failed", value: { message } },
    ...answerFields(options),
  });
}

/** Ask the model to call the tool again, with `message` as feedback. */
export function callRetry(call: CallRef, message: string, options: AnswerOptions = {}): CallResult {
  return create(CallResultSchema, {
    toolCallId: callId(call),
    result: { case: "retry", value: { message } },
    ...answerFields(options),
  });
}

/**
 * The `DeferredToolResume` for a batch: the batch as the server sent it, and the answers sorted
 * into their categories (approval decisions and call results, each in the order given).
 *
 * The server checks that every item is answered exactly once before anything runs; this helper
 * only builds the message.
 *
 * @param recovery - Recover an interrupted continuation of answers already accepted (see
 *   `DeferredToolResume.recovery`). Default false.
 */
export function resumeWith(
  requests: DeferredToolRequests,
  answers: readonly Answer[],
  { recovery = false }: { recovery?: boolean } = {},
): DeferredToolResume {
  return create(DeferredToolResumeSchema, { requests, results: answersOf(answers), recovery });
}

/**
 * The answers to a thread's pending batch, for `client.threads.run` / `stream` (`answers`): one
 * per item of `Thread.pending` (or of the suspended result's `deferred`), in any order, sorted
 * into their categories (approval decisions and call results, each in the order given). The
 * server pairs them with the batch it stored, by call ID, and checks that every item is answered
 * exactly once before anything runs.
 */
export function answers(...answers: Answer[]): DeferredToolResults {
  return answersOf(answers);
}

function answersOf(answers: readonly Answer[]): DeferredToolResults {
  return create(DeferredToolResultsSchema, {
    approvals: answers.filter((answer): answer is ApprovalResult => answer.$typeName === "threadline.v1.ApprovalResult"),
    calls: answers.filter((answer): answer is CallResult => answer.$typeName === "threadline.v1.CallResult"),
  });
}

/** Every pending item of a batch, approvals first, each with the arguments parsed. */
export function pendingCalls(requests: DeferredToolRequests | undefined): PendingCall[] {
  if (requests === undefined) {
    return [];
  }
  return [...requests.approvals, ...requests.calls].map((call) => ({ call, args: parseArgs(call.argsJson) }));
}

/** A pending item with its parsed arguments. */
export interface PendingCall {
  /** The item as the server sent it. */
  readonly call: DeferredToolCall;
  /** `args_json` parsed; `{}` when the model sent no arguments. */
  readonly args: unknown;
}

function parseArgs(argsJson: string): unknown {
  return argsJson === "" ? {} : (JSON.parse(argsJson) as unknown);
}

function callId(call: CallRef): string {
  return typeof call === "string" ? call : call.toolCallId;
}

function answerFields(options: AnswerOptions): { answeredBy: string; metadataJson: string } {
  return {
    answeredBy: options.answeredBy ?? "",
    metadataJson: options.metadata === undefined ? "" : toJson(options.metadata),
  };
}

function toJson(value: unknown): string {
  // `undefined` (a tool that returns nothing) has no JSON form; record it as null.
  const text = JSON.stringify(value);
  return text === undefined ? "null" : text;
}
