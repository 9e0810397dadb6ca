/**
 * The Live output region: one run's events as they stream. Text grows as its deltas arrive; tool
 * calls, their results, inline children, commits and the terminal result each get a line, the
 * result's status (`COMPLETED`, `SUSPENDED`, …) in bold. The region is `aria-live="polite"`, so a
 * screen reader hears the run without leaving the prompt.
 *
 * @module
 */

import {
  CheckpointKind,
  OmissionReason,
  PartKind,
  type RunEvent,
  type RunResult,
  RunStatus,
  ToolOutcome,
} from "../../clients/typescript/src/index.js";
import { type Child, h, prettyJson } from "./dom.js";
import { enumName } from "./format.js";

/** The page's view of one streamed run; made by `startLive`, fed each event. */
export interface LiveRun {
  /** Show one event. */
  event(event: RunEvent): void;
  /** Add a line of the console's own (a cancel asked, the stream ended early). */
  note(text: string, tone?: "good" | "bad" | "warn"): void;
}

/** Clear the Live output and start showing a run; `title` says what was sent. */
export function startLive(container: HTMLElement, title: string): LiveRun {
  const log = h("ol", { class: "live-log" });
  container.replaceChildren(h("p", { class: "live-title" }, title), log);
  /** The model's parts of the current response, by index (a new response starts them again). */
  const parts = new Map<number, HTMLElement>();
  const line = (...children: Child[]): HTMLElement => {
    const item = h("li", {}, ...children);
    log.append(item);
    return item;
  };
  return {
    event(event) {
      const { value, case: kind } = event.event;
      switch (kind) {
        case "runStarted":
          parts.clear();
          line(h("span", { class: "muted" }, "Run started: "), h("code", {}, event.runId));
          break;
        case "partStart": {
          const item = partLine(line, value.kind, value.toolName);
          parts.set(value.partIndex, item);
          item.querySelector(".grow")?.append(value.kind === PartKind.TOOL_CALL ? value.argsJson : value.content);
          break;
        }
        case "partDelta": {
          let item = parts.get(value.partIndex);
          if (item === undefined) {
            item = partLine(line, value.kind, value.toolNameDelta);
            parts.set(value.partIndex, item);
          }
          item.querySelector(".grow")?.append(value.kind === PartKind.TOOL_CALL ? value.argsDelta : value.contentDelta);
          break;
        }
        case "partEnd": {
          const item = parts.get(value.partIndex) ?? partLine(line, value.kind, value.toolName);
          const grow = item.querySelector(".grow");
          if (grow !== null) {
            grow.textContent = value.kind === PartKind.TOOL_CALL ? prettyJson(value.argsJson) : value.content;
          }
          parts.delete(value.partIndex);
          break;
        }
        case "toolCall":
          line(h("span", { class: "muted" }, "Running tool "), h("code", {}, value.toolName), " ", h("code", { class: "small" }, value.argsJson));
          break;
        case "toolResult": {
          const outcome = enumName(ToolOutcome, value.outcome);
          line(
            h("span", { class: "muted" }, "Tool result "),
            h("code", {}, value.toolName),
            " ",
            h("span", { class: `tag ${value.outcome === ToolOutcome.SUCCESS ? "good" : "bad"}` }, outcome),
            " ",
            h("span", {}, resultText(value.contentJson)),
          );
          break;
        }
        case "inlineDelegation":
          line(h("span", { class: "muted" }, "Child "), h("code", {}, value.subagent), ` ${value.action}: ${value.status}`);
          break;
        case "threadCommitted":
          // Parts restart at index 0 in the next response; a commit marks a boundary.
          line(
            h(
              "span",
              { class: "muted" },
              `Committed checkpoint ${value.revision} (${enumName(CheckpointKind, value.kind)})${value.replayed ? ", replayed" : ""}`,
            ),
          );
          break;
        case "eventsOmitted":
          line(
            h("span", { class: "warn" }, `Events ${value.firstSequence}–${event.sequence} not recorded (${enumName(OmissionReason, value.reason)}).`),
          );
          break;
        case "result":
          resultLines(line, value);
          break;
        default:
          // lifecycle, native, final result, checkpoint candidates: not part of what a person follows.
          break;
      }
    },
    note(text, tone) {
      line(h("span", { class: tone ?? "muted" }, text));
    },
  };
}

/** A line for one of the model's parts, with a `.grow` span its deltas extend. */
function partLine(line: (...children: Child[]) => HTMLElement, kind: PartKind, toolName: string): HTMLElement {
  if (kind === PartKind.TOOL_CALL) {
    return line(h("span", { class: "muted" }, "Model calls "), h("code", {}, toolName), " ", h("code", { class: "grow small" }));
  }
  if (kind === PartKind.THINKING) {
    return line(h("span", { class: "muted" }, "Thinking: "), h("span", { class: "grow thinking" }));
  }
  return line(h("span", { class: "grow model-text" }));
}

/** The terminal result: its status, then its output, failure or what it waits on. */
function resultLines(line: (...children: Child[]) => HTMLElement, result: RunResult): void {
  const status = enumName(RunStatus, result.status);
  const tone = result.status === RunStatus.COMPLETED ? "good" : result.status === RunStatus.SUSPENDED ? "warn" : "bad";
  line(h("span", { class: "muted" }, "Result: "), h("strong", { class: `result-status ${tone}`, "data-status": status }, status));
  if (result.outputJson !== "") {
    line(h("span", { class: "muted" }, "Output: "), resultText(result.outputJson));
  }
  if (result.failure !== undefined) {
    line(h("span", { class: "bad" }, `Failure ${result.failure.code}: ${result.failure.message}`));
  }
  const waiting = [
    ...(result.deferred?.approvals ?? []).map((call) => `${call.toolName} (approval)`),
    ...(result.deferred?.calls ?? []).map((call) => `${call.toolName} (result)`),
  ];
  if (waiting.length > 0) {
    line(h("span", { class: "warn" }, `Waiting on: ${waiting.join(", ")} — answer in Pending.`));
  }
}

/** A JSON value from the server as text: a string as it is, anything else compact JSON. */
function resultText(json: string): string {
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === "string" ? value : JSON.stringify(value);
  } catch {
    return json;
  }
}
