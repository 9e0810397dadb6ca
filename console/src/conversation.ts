/**
 * A checkpoint's history as a conversation: pydantic-ai's ModelMessage JSON
 * (`state.messageHistory.data`: `kind` "request" | "response", each with `parts` by `part_kind`)
 * turned into user prompts, model text, tool calls with their arguments and results, approvals
 * and errors. The history is the server's, so every value is treated as untrusted, shape included:
 * unknown kinds and parts are shown as JSON rather than dropped or trusted.
 *
 * @module
 */

import { type DeferredToolRequests, ToolCategory } from "../../clients/typescript/src/index.js";
import { type Child, displayValue, h, prettyJson } from "./dom.js";

/** What the conversation needs besides the history. */
export interface ConversationContext {
  /** The batch the checkpoint waits on: its calls are marked as awaiting an answer. */
  readonly pending: DeferredToolRequests | undefined;
  /** A tool's category, to mark the calls of approval tools that ran as approved. */
  readonly category: (tool: string) => ToolCategory | undefined;
}

/** A JSON object of the history (a message or a part), its fields unknown until checked. */
type Json = Record<string, unknown>;

/** One tool call on the page, waiting for its result to be filled in. */
interface CallView {
  readonly toolName: string;
  readonly status: HTMLElement;
  readonly result: HTMLElement;
}

/** The conversation of a history (`data`), as nodes for the Conversation region. */
export function renderConversation(data: string | undefined, context: ConversationContext): Child[] {
  if (data === undefined || data.trim() === "" || data.trim() === "[]") {
    return [h("p", { class: "muted" }, "No messages yet.")];
  }
  let messages: unknown;
  try {
    messages = JSON.parse(data);
  } catch (err) {
    return [h("p", { class: "bad" }, `The history is not readable JSON: ${err instanceof Error ? err.message : String(err)}`)];
  }
  if (!Array.isArray(messages)) {
    return [h("p", { class: "bad" }, "The history is not a list of messages."), h("pre", {}, displayValue(messages))];
  }
  const calls = new Map<string, CallView>();
  const waiting = waitingCalls(context.pending);
  const items: HTMLElement[] = [];
  let instructions = "";
  for (const message of messages) {
    if (!isObject(message)) {
      items.push(unknownItem("message", message));
      continue;
    }
    if (message["kind"] === "request") {
      const text = typeof message["instructions"] === "string" ? message["instructions"] : "";
      const shown = text !== "" && text !== instructions ? text : "";
      instructions = text || instructions;
      const item = requestItem(message, shown, calls, context);
      if (item !== undefined) {
        items.push(item);
      }
    } else if (message["kind"] === "response") {
      items.push(responseItem(message, calls, waiting));
    } else {
      items.push(unknownItem(`message of kind ${String(message["kind"])}`, message));
    }
  }
  return [h("ol", { class: "messages" }, ...items)];
}

/** The calls a pending batch waits on, by call ID: what each waits for. */
function waitingCalls(pending: DeferredToolRequests | undefined): Map<string, string> {
  const waiting = new Map<string, string>();
  for (const call of pending?.approvals ?? []) {
    waiting.set(call.toolCallId, "awaiting approval");
  }
  for (const call of pending?.calls ?? []) {
    waiting.set(call.toolCallId, call.child === undefined ? "awaiting result" : "awaiting child");
  }
  return waiting;
}

/**
 * A request: user and system prompts as an item of their own; tool returns and retry prompts
 * filled into the calls they answer (undefined when nothing else is left to show).
 */
function requestItem(message: Json, instructions: string, calls: Map<string, CallView>, context: ConversationContext): HTMLElement | undefined {
  const body: Child[] = [];
  let who = "";
  for (const part of parts(message)) {
    switch (part["part_kind"]) {
      case "user-prompt":
        who = "User";
        body.push(h("div", { class: "text" }, promptText(part["content"])));
        break;
      case "system-prompt":
        body.push(h("details", {}, h("summary", {}, "System prompt"), h("pre", {}, displayValue(part["content"]))));
        break;
      case "tool-return":
      case "builtin-tool-return": {
        const orphan = fillResult(part, calls, context);
        if (orphan !== undefined) {
          who ||= "Tool results";
          body.push(orphan);
        }
        break;
      }
      case "retry-prompt": {
        const orphan = fillRetry(part, calls);
        if (orphan !== undefined) {
          who ||= "Retry";
          body.push(orphan);
        }
        break;
      }
      default:
        body.push(unknownPart(part));
    }
  }
  if (body.length === 0) {
    return undefined;
  }
  return h(
    "li",
    { class: `message ${who === "User" ? "user" : "request"}` },
    h("p", { class: "who" }, who || "Request", timeOf(message)),
    instructions === "" ? null : h("details", {}, h("summary", {}, "Instructions"), h("pre", {}, instructions)),
    ...body,
  );
}

/** A response: the model's text, thinking, and tool calls (each waiting for its result). */
function responseItem(message: Json, calls: Map<string, CallView>, waiting: Map<string, string>): HTMLElement {
  const body: Child[] = [];
  for (const part of parts(message)) {
    switch (part["part_kind"]) {
      case "text":
        body.push(h("div", { class: "text" }, displayValue(part["content"])));
        break;
      case "thinking":
        body.push(h("details", { class: "thinking" }, h("summary", {}, "Thinking"), h("pre", {}, displayValue(part["content"]))));
        break;
      case "tool-call":
      case "builtin-tool-call":
        body.push(callBlock(part, calls, waiting));
        break;
      default:
        body.push(unknownPart(part));
    }
  }
  const model = typeof message["model_name"] === "string" ? message["model_name"] : "";
  return h(
    "li",
    { class: "message model" },
    h("p", { class: "who" }, "Model", model === "" ? "" : h("span", { class: "muted" }, ` · ${model}`), timeOf(message)),
    ...(body.length === 0 ? [h("p", { class: "muted" }, "(empty response)")] : body),
  );
}

/** A tool call: its name and arguments, a status tag, and a slot its result fills later. */
function callBlock(part: Json, calls: Map<string, CallView>, waiting: Map<string, string>): HTMLElement {
  const toolName = stringField(part, "tool_name") || "(unnamed tool)";
  const callId = stringField(part, "tool_call_id");
  const args = part["args"];
  const argsText = typeof args === "string" ? prettyJson(args) : args === null || args === undefined ? "" : displayValue(args);
  const awaiting = waiting.get(callId);
  const status = h("span", { class: `tag ${awaiting === undefined ? "" : "warn"}` }, awaiting ?? "no result yet");
  const result = h("div", { class: "result" });
  calls.set(callId, { toolName, status, result });
  return h(
    "div",
    { class: "call", "data-call-id": callId },
    h(
      "p",
      { class: "call-head" },
      "Tool call ",
      h("code", {}, toolName),
      " ",
      status,
      callId === "" ? null : h("span", { class: "muted small" }, ` ${callId}`),
    ),
    argsText === "" ? null : h("pre", { class: "args", "aria-label": `Arguments of ${toolName}` }, argsText),
    result,
  );
}

/** Put a tool return into its call's block; returns a block of its own when the call is not in the history. */
function fillResult(part: Json, calls: Map<string, CallView>, context: ConversationContext): HTMLElement | undefined {
  const toolName = stringField(part, "tool_name");
  const outcome = stringField(part, "outcome") || "success";
  const content = displayValue(part["content"]);
  const view = calls.get(stringField(part, "tool_call_id"));
  const approval = context.category(toolName) === ToolCategory.REQUIRES_APPROVAL;
  const label = outcome === "denied" ? "denied" : approval && outcome === "success" ? "approved, ran" : outcome;
  const block = h(
    "div",
    { class: `outcome outcome-${outcome}` },
    h("p", { class: "small" }, outcome === "denied" ? "Denied: " : "Result: "),
    h("pre", {}, content),
  );
  if (view === undefined) {
    const head = h("p", { class: "call-head" }, "Tool result ", h("code", {}, toolName || "(unnamed tool)"), " ", tag(label, outcome));
    return h("div", { class: "call" }, head, block);
  }
  view.status.replaceWith(tag(label, outcome));
  view.result.replaceChildren(block);
  return undefined;
}

/** Put a retry prompt (the model's call was refused: bad arguments, a retry asked) into its call; else its own block. */
function fillRetry(part: Json, calls: Map<string, CallView>): HTMLElement | undefined {
  const content = displayValue(part["content"]);
  const block = h("div", { class: "outcome outcome-failed" }, h("p", { class: "small" }, "Retry asked: "), h("pre", {}, content));
  const view = calls.get(stringField(part, "tool_call_id"));
  if (view === undefined) {
    const toolName = stringField(part, "tool_name");
    return h("div", { class: "call error-part" }, h("p", { class: "call-head" }, "Retry prompt", toolName === "" ? "" : ` for ${toolName}`), block);
  }
  view.status.replaceWith(tag("retry", "failed"));
  view.result.replaceChildren(block);
  return undefined;
}

/** A status tag, coloured by outcome. */
function tag(text: string, outcome: string): HTMLElement {
  const tone = outcome === "success" ? "good" : outcome === "denied" || outcome === "failed" ? "bad" : "warn";
  return h("span", { class: `tag ${tone}` }, text);
}

/** A user prompt's content: text, or a list of text and media items (media named, not loaded). */
function promptText(content: unknown): string {
  if (typeof content === "string") {
    return content;
  }
  if (Array.isArray(content)) {
    return content.map(promptItem).join("\n");
  }
  return displayValue(content);
}

/** One item of a multi-part prompt: text as it is, media by kind and URL (never fetched). */
function promptItem(item: unknown): string {
  if (typeof item === "string") {
    return item;
  }
  if (!isObject(item)) {
    return displayValue(item);
  }
  const url = typeof item["url"] === "string" ? `: ${item["url"]}` : "";
  return `[${String(item["kind"] ?? "item")}${url}]`;
}

/** A message's parts that are objects (anything else shown as unknown). */
function parts(message: Json): Json[] {
  const list = message["parts"];
  if (!Array.isArray(list)) {
    return [];
  }
  return list.map((part) => (isObject(part) ? part : { part_kind: "(not an object)", value: part }));
}

/** A part this console does not know, shown as JSON so nothing is hidden. */
function unknownPart(part: Json): HTMLElement {
  const kind = String(part["part_kind"] ?? "(no part_kind)");
  return h("details", { class: "unknown" }, h("summary", {}, `Part ${kind}`), h("pre", {}, displayValue(part)));
}

/** A message this console does not know. */
function unknownItem(what: string, value: unknown): HTMLElement {
  return h("li", { class: "message unknown" }, h("details", {}, h("summary", {}, `Unknown ${what}`), h("pre", {}, displayValue(value))));
}

/** A message's time, as a `<time>` after its author. */
function timeOf(message: Json): Child {
  const stamp = message["timestamp"];
  if (typeof stamp !== "string") {
    return null;
  }
  const date = new Date(stamp);
  if (Number.isNaN(date.getTime())) {
    return null;
  }
  return h("time", { class: "muted small", datetime: date.toISOString() }, ` ${date.toLocaleTimeString()}`);
}

function stringField(object: Json, key: string): string {
  const value = object[key];
  return typeof value === "string" ? value : "";
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
