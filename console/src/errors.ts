/**
 * Every failure on the page, shown: the server's typed errors with their reason, message and
 * metadata, and anything else thrown, so nothing ends as a blank page or a silent console line.
 *
 * One `role="alert"` element (`#errors`) holds the current error of each part of the page (the
 * server, the list, the open thread, the page itself): a newer error of the same part replaces the
 * older, and a part's next action clears it. A refused token is also said next to the Token field.
 *
 * @module
 */

import { Code, ThreadlineError, codeName } from "../../clients/typescript/src/index.js";
import { byId, h } from "./dom.js";

/** The part of the page an error belongs to. */
export type ErrorSource = "server" | "threads" | "thread" | "page";

/** An error as the page tells it. */
export interface DescribedError {
  /** The ErrorInfo reason (`REVISION_CONFLICT`), else the status code (`UNAVAILABLE`), else the error's name. */
  readonly title: string;
  /** The server's message (without the SDK's `[code reason]` prefix), or the error's. */
  readonly message: string;
  /** The code, the metadata and the field violations, one line each. */
  readonly details: string[];
  /** A `REVISION_CONFLICT`: the view is stale, reloading helps. */
  readonly conflict: boolean;
  /** `UNAUTHENTICATED`: the token is missing or wrong. */
  readonly unauthenticated: boolean;
}

/** Say what an error is, whatever was thrown. */
export function describeError(err: unknown): DescribedError {
  if (err instanceof ThreadlineError) {
    const code = codeName(err.code).toUpperCase();
    const details = [`code: ${code}`];
    for (const [key, value] of Object.entries(err.metadata)) {
      details.push(`${key}: ${value}`);
    }
    for (const violation of err.fieldViolations) {
      details.push(`${violation.field}: ${violation.description}`);
    }
    if (unreachable(err)) {
      details.push(
        "The server did not answer: is it running with --http-port at this address, and does its --http-cors-origin name this page's origin?",
      );
    }
    return {
      title: err.reason !== "" ? err.reason : code,
      message: err.rawMessage !== "" ? err.rawMessage : err.message,
      details,
      conflict: err.reason === "REVISION_CONFLICT",
      unauthenticated: err.code === Code.Unauthenticated,
    };
  }
  if (err instanceof Error) {
    return { title: err.name, message: err.message, details: [], conflict: false, unauthenticated: false };
  }
  return { title: "Error", message: String(err), details: [], conflict: false, unauthenticated: false };
}

/** A call that never reached the server (down, wrong port, or refused by CORS: `fetch` cannot tell them apart). */
function unreachable(err: ThreadlineError): boolean {
  return err.reason === "" && (err.code === Code.Unavailable || (err.code === Code.Unknown && /fetch|network/i.test(err.rawMessage)));
}

/** What an error entry offers besides dismissing it. */
export interface ErrorOptions {
  /** For a conflict: reload the open thread (the `Reload thread` button). */
  readonly reload?: () => void;
}

/**
 * Show `err` as `source`'s current error (replacing its previous one). The same error of another
 * part (a refused token, an unreachable server fail every call alike) is shown once.
 */
export function showError(source: ErrorSource, err: unknown, options: ErrorOptions = {}): void {
  const described = describeError(err);
  const box = byId("errors", HTMLElement);
  const entry = h(
    "div",
    { class: "error", "data-source": source },
    h("p", { class: "error-title" }, h("strong", {}, described.title), ` — ${described.message}`),
    described.details.length > 0 ? h("p", { class: "error-details" }, described.details.join(" · ")) : null,
  );
  const actions = h("p", { class: "row" });
  if (described.conflict && options.reload !== undefined) {
    const reload = options.reload;
    actions.append(h("button", { type: "button", onclick: () => reload() }, "Reload thread"));
  }
  actions.append(h("button", { type: "button", class: "quiet", onclick: () => entry.remove() }, "Dismiss"));
  entry.append(actions);
  const said = `${described.title} — ${described.message}`;
  for (const other of box.querySelectorAll<HTMLElement>(".error")) {
    if (other.dataset["source"] !== source && other.querySelector(".error-title")?.textContent === said) {
      other.remove();
    }
  }
  const previous = box.querySelector(`[data-source="${source}"]`);
  if (previous === null) {
    box.append(entry);
  } else {
    previous.replaceWith(entry);
  }
  if (described.unauthenticated) {
    const note = byId("token-note", HTMLElement);
    const what = byId("token", HTMLInputElement).value === "" ? "a call without a token" : "this token";
    note.textContent = `UNAUTHENTICATED — the server refused ${what}: enter its --token above and choose Use token.`;
    note.classList.add("bad");
  }
}

/** Clear `source`'s error: its next action started (or the part was reloaded). */
export function clearError(source: ErrorSource): void {
  byId("errors", HTMLElement).querySelector(`[data-source="${source}"]`)?.remove();
}

/**
 * An event handler that runs `action` and shows whatever it throws as `source`'s error, so no
 * failure of a click or a submit goes unseen. Form submits are kept from reloading the page.
 */
export function guard(source: ErrorSource, action: (event: Event) => Promise<void> | void, options: ErrorOptions = {}): (event: Event) => void {
  return (event) => {
    if (event.type === "submit") {
      event.preventDefault();
    }
    try {
      const done = action(event);
      if (done !== undefined) {
        done.catch((err: unknown) => showError(source, err, options));
      }
    } catch (err) {
      showError(source, err, options);
    }
  };
}

/** Show what nothing else caught (a bug, a failed import): a thrown error must never blank the page silently. */
export function installGlobalHandlers(): void {
  window.addEventListener("error", (event) => showError("page", event.error ?? event.message));
  window.addEventListener("unhandledrejection", (event) => showError("page", event.reason));
}
