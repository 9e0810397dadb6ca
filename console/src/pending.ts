/**
 * The Pending region: the batch a suspended thread waits on, and the answers to it. Each approval
 * gets `Approve <tool>` / `Deny <tool>` (with a denial message), each external call a JSON result
 * (`Send result for <tool>` checks and keeps it); `Submit answers` then sends every answer in one
 * turn, by call ID, with the SDK's `approve`, `deny` and `callResult`.
 *
 * The choices live in the form itself (its attributes and fields), so a re-render that keeps the
 * same batch keeps what the user entered, and nothing else holds them.
 *
 * @module
 */

import {
  type Answer,
  DeferredKind,
  type DeferredToolCall,
  type DeferredToolRequests,
  approve,
  callResult,
  deny,
} from "../../clients/typescript/src/index.js";
import { type Child, h, prettyJson, replaceContent } from "./dom.js";
import { guard } from "./errors.js";

/** A batch that cannot be sent as it is: an item without an answer, or a result that is not JSON. */
export class AnswerError extends Error {
  override name = "Answers not sent";
}

/**
 * Show `pending` in `container` (unless it already shows this very batch, whose entries are kept).
 * `submit` sends the answers (`Submit answers`); what it or the form throws is shown as the
 * thread's error. When the batch is answered and its form goes, keyboard focus moves to `fallback`.
 */
export function renderPending(
  container: HTMLElement,
  pending: DeferredToolRequests | undefined,
  submit: (answers: Answer[]) => Promise<void>,
  fallback?: HTMLElement,
): void {
  const items = [...(pending?.approvals ?? []), ...(pending?.calls ?? [])];
  const batch = items.map((call) => call.toolCallId).join("\n");
  if (container.dataset["batch"] === batch && container.childElementCount > 0) {
    return;
  }
  container.dataset["batch"] = batch;
  if (items.length === 0) {
    replaceContent(container, [h("p", { class: "muted" }, "Nothing pending.")], fallback);
    return;
  }
  const names = new Map<string, number>();
  const label = (call: DeferredToolCall) => {
    const seen = (names.get(call.toolName) ?? 0) + 1;
    names.set(call.toolName, seen);
    return seen === 1 ? call.toolName : `${call.toolName} (${seen})`;
  };
  const form = h(
    "form",
    { class: "pending-form", novalidate: true },
    ...(pending?.approvals ?? []).map((call, index) => approvalItem(call, label(call), `a${index}`)),
    ...(pending?.calls ?? []).map((call, index) => callItem(call, label(call), `c${index}`)),
    h("p", { class: "row" }, h("button", { type: "submit", id: "submit-answers", "data-key": "submit-answers" }, "Submit answers")),
  );
  form.addEventListener("submit", guard("thread", () => submit(collectAnswers(form))));
  form.addEventListener("click", guard("thread", (event) => choose(event)));
  const one = items.length === 1;
  const intro = `The thread waits on ${items.length} call${one ? "" : "s"}: answer ${one ? "it" : "each"}, then Submit answers.`;
  replaceContent(container, [h("p", {}, intro), form], fallback);
}

/** An approval: what the model wants to run, and Approve / Deny (with a message). */
function approvalItem(call: DeferredToolCall, name: string, slot: string): HTMLElement {
  const messageId = `deny-${slot}-${domId(call.toolCallId)}`;
  return h(
    "fieldset",
    { class: "pending-item", "data-call-id": call.toolCallId, "data-kind": "approval", "data-answer": "" },
    h("legend", {}, "Approval: ", h("code", {}, name)),
    argsView(call),
    h(
      "p",
      { class: "row" },
      h("button", { type: "button", "data-choice": "approve", "aria-pressed": "false", "data-key": `approve:${call.toolCallId}` }, `Approve ${name}`),
      h("button", { type: "button", "data-choice": "deny", "aria-pressed": "false", "data-key": `deny:${call.toolCallId}` }, `Deny ${name}`),
    ),
    h("label", { for: messageId }, `Denial message for ${name}`),
    h("input", { id: messageId, type: "text", "data-field": "message", autocomplete: "off" }),
    h("p", { class: "choice small", role: "status" }, "No answer yet."),
  );
}

/** An external call (or a question, a child request): its JSON result. */
function callItem(call: DeferredToolCall, name: string, slot: string): HTMLElement {
  const resultId = `result-${slot}-${domId(call.toolCallId)}`;
  const what = call.child !== undefined ? "Child request" : call.kind === DeferredKind.QUESTION ? "Question" : "External call";
  const request = call.child;
  const child: Child =
    request === undefined ? null : h("p", { class: "small" }, `Run agent ${request.agent} on thread ${request.threadId}, then answer with its outcome.`);
  return h(
    "fieldset",
    { class: "pending-item", "data-call-id": call.toolCallId, "data-kind": "call", "data-answer": "" },
    h("legend", {}, `${what}: `, h("code", {}, name)),
    argsView(call),
    child,
    h("label", { for: resultId }, `Result for ${name}`),
    h("textarea", { id: resultId, rows: 3, "data-field": "result", spellcheck: "false", placeholder: '{"temperature": 21}' }),
    h(
      "p",
      { class: "row" },
      h("button", { type: "button", "data-choice": "result", "data-key": `result:${call.toolCallId}` }, `Send result for ${name}`),
    ),
    h("p", { class: "choice small", role: "status" }, "No result yet (JSON)."),
  );
}

/** The call's arguments, pretty-printed. */
function argsView(call: DeferredToolCall): Child {
  const args = prettyJson(call.argsJson);
  return args === "" ? null : h("pre", { class: "args", "aria-label": `Arguments of ${call.toolName}` }, args);
}

/** A click on Approve, Deny or Send result: record the choice on its item and say it. */
function choose(event: Event): void {
  const button = event.target instanceof Element ? event.target.closest<HTMLButtonElement>("button[data-choice]") : null;
  const item = button?.closest<HTMLElement>("fieldset[data-call-id]");
  if (button == null || item == null) {
    return;
  }
  const choice = button.dataset["choice"] ?? "";
  const said = item.querySelector<HTMLElement>(".choice");
  if (choice === "result") {
    const text = field(item, "result").value;
    const value = parseResult(text, item);
    item.dataset["answer"] = "result";
    if (said !== null) {
      said.textContent = `Result ready: ${JSON.stringify(value)}`;
    }
    return;
  }
  item.dataset["answer"] = choice;
  for (const other of item.querySelectorAll<HTMLButtonElement>("button[data-choice]")) {
    other.setAttribute("aria-pressed", String(other === button));
  }
  if (said !== null) {
    said.textContent = choice === "approve" ? "Will approve." : "Will deny (with the message above, if any).";
  }
}

/**
 * Every item's answer, in the batch's order.
 *
 * @throws AnswerError naming the items left unanswered, or a result that is not JSON.
 */
function collectAnswers(form: HTMLFormElement): Answer[] {
  const answers: Answer[] = [];
  const missing: string[] = [];
  for (const item of form.querySelectorAll<HTMLElement>("fieldset[data-call-id]")) {
    const callId = item.dataset["callId"] ?? "";
    const name = item.querySelector("legend code")?.textContent ?? callId;
    if (item.dataset["kind"] === "approval") {
      const answer = item.dataset["answer"];
      if (answer === "approve") {
        answers.push(approve(callId));
      } else if (answer === "deny") {
        answers.push(deny(callId, field(item, "message").value.trim()));
      } else {
        missing.push(name);
      }
      continue;
    }
    // A result typed but not yet "sent" counts too: the field is the answer.
    const text = field(item, "result").value;
    if (text.trim() === "") {
      missing.push(name);
    } else {
      answers.push(callResult(callId, parseResult(text, item)));
    }
  }
  if (missing.length > 0) {
    throw new AnswerError(`Answer every pending call first; no answer for ${missing.join(", ")}.`);
  }
  return answers;
}

/**
 * A result field's JSON value.
 *
 * @throws AnswerError when it is empty or not JSON.
 */
function parseResult(text: string, item: HTMLElement): unknown {
  const name = item.querySelector("legend code")?.textContent ?? "";
  if (text.trim() === "") {
    throw new AnswerError(`Result for ${name} is empty: write its JSON value (e.g. "done" or {"ok": true}).`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new AnswerError(`Result for ${name} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** A named field of an item. */
function field(item: HTMLElement, name: string): HTMLInputElement | HTMLTextAreaElement {
  const found = item.querySelector(`[data-field="${name}"]`);
  if (!(found instanceof HTMLInputElement || found instanceof HTMLTextAreaElement)) {
    throw new Error(`pending item without its ${name} field`);
  }
  return found;
}

/** A call ID as a safe piece of an element ID. */
function domId(callId: string): string {
  return callId.replace(/[^A-Za-z0-9_-]/g, "_");
}
