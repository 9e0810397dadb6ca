/**
 * The Thread panel: one thread's head (revision, status), its checkpoints as a timeline, the head's
 * conversation, its pending batch, and what can be done to it: run a turn and watch it stream,
 * answer the batch, fork, roll back, cancel the running run, delete.
 *
 * Every mutation sends `expectedRevision` = the revision the panel shows, so acting on a stale view
 * is refused (`REVISION_CONFLICT`) instead of applied to a head the user never saw; the error then
 * offers `Reload thread`. The panel reloads itself only after something of its own changed the
 * thread (a turn that ran, a rollback), never behind the user's back.
 *
 * @module
 */

import {
  type Answer,
  type Checkpoint,
  CheckpointKind,
  type RunEvent,
  type ThreadRunInput,
  answers,
  ThreadRunStatus,
  ThreadStatus,
} from "../../clients/typescript/src/index.js";
import { confirmAction } from "./dialog.js";
import { byId, h, replaceContent, whileBusy } from "./dom.js";
import { clearError, guard, showError } from "./errors.js";
import { enumName, labelItems, timeText } from "./format.js";
import { renderConversation } from "./conversation.js";
import { startLive } from "./live.js";
import { renderPending } from "./pending.js";
import { toolCategory } from "./server.js";
import { type FollowedRun, app, client } from "./state.js";
import { loadThreads, markCurrent } from "./threads.js";

/** At most this many checkpoints are listed (newest first); a longer thread says so. */
const MAX_CHECKPOINTS = 500;

/** A client tool the console declares by name only: any JSON object as arguments. */
const OPEN_SCHEMA = JSON.stringify({ type: "object", additionalProperties: true });

/**
 * `Reload thread` (a conflict's offer): read the thread again and put keyboard focus on its title,
 * since the button itself goes with the error it belonged to.
 */
function reloadAfterConflict(): void {
  byId("thread-title", HTMLElement).focus();
  reloadThread().catch(fail);
}

/** Show a thread error; a conflict's entry offers `Reload thread`. */
function fail(err: unknown): void {
  showError("thread", err, { reload: reloadAfterConflict });
}

/** An event handler for the thread's controls: errors shown as the thread's, with the conflict's reload. */
function act(action: (event: Event) => Promise<void> | void): (event: Event) => void {
  return guard("thread", action, { reload: reloadAfterConflict });
}

/** Wire the panel's fixed controls (the checkpoint buttons are found by delegation). */
export function bindThread(): void {
  const reload = byId("thread-reload", HTMLButtonElement);
  reload.addEventListener(
    "click",
    act(() => whileBusy(reload, reloadThread)),
  );
  const runForm = byId("run-form", HTMLFormElement);
  runForm.addEventListener("submit", act(runPrompt));
  byId("prompt", HTMLTextAreaElement).addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      runForm.requestSubmit();
    }
  });
  byId("cancel-run", HTMLButtonElement).addEventListener("click", act(cancelRun));
  byId("delete-thread", HTMLButtonElement).addEventListener("click", act(deleteThread));
  byId("checkpoints", HTMLOListElement).addEventListener(
    "click",
    act(async (event) => {
      const button = event.target instanceof Element ? event.target.closest<HTMLButtonElement>("button[data-action]") : null;
      const revision = BigInt(button?.dataset["revision"] ?? "0");
      if (button?.dataset["action"] === "fork") {
        await forkAt(revision);
      } else if (button?.dataset["action"] === "rollback") {
        await rollbackTo(revision);
      }
    }),
  );
  byId("thread-note", HTMLElement).addEventListener(
    "click",
    act(async (event) => {
      const button = event.target instanceof Element ? event.target.closest<HTMLButtonElement>("button[data-open]") : null;
      const threadId = button?.dataset["open"];
      if (threadId !== undefined) {
        await openThread(threadId, { focus: true });
      }
    }),
  );
}

/**
 * Open a thread: read it (FULL view: the head's state) and its checkpoints, and show them. A run of
 * another thread the Live output followed is left (it goes on); a running thread's run is joined.
 * `focus` moves keyboard focus to its heading (opened from the list, not reloaded).
 */
export async function openThread(threadId: string, options: { focus?: boolean } = {}): Promise<void> {
  clearError("thread");
  const sequence = ++app.loadSequence;
  if (app.run !== undefined && app.run.threadId !== threadId) {
    app.run.controller.abort();
    app.run = undefined;
  }
  const threads = client().threads;
  const [thread, listed] = await Promise.all([threads.get(threadId, { full: true }), listCheckpoints(threadId)]);
  if (sequence !== app.loadSequence) {
    return; // another thread was opened meanwhile
  }
  const changed = app.open?.thread.threadId !== threadId;
  app.open = { thread, checkpoints: listed.checkpoints, more: listed.more };
  // A note spoke of the view before this read (an action's outcome sets its own after reloading).
  byId("thread-note", HTMLElement).replaceChildren();
  if (changed) {
    byId("live", HTMLElement).replaceChildren(h("p", { class: "muted" }, "No run yet in this view."));
  }
  history.replaceState(null, "", `${location.pathname}${location.search}#thread=${encodeURIComponent(threadId)}`);
  render();
  markCurrent();
  if (options.focus === true) {
    byId("thread-title", HTMLElement).focus();
  }
  if (thread.status === ThreadStatus.RUNNING && app.run === undefined) {
    void joinRunning().catch(fail);
  }
}

/** Read the open thread again (after a change, or the user's Reload / Reload thread). */
export async function reloadThread(): Promise<void> {
  const open = app.open;
  if (open !== undefined) {
    await openThread(open.thread.threadId);
  }
}

/** A thread's checkpoints, newest first, up to `MAX_CHECKPOINTS`. */
async function listCheckpoints(threadId: string): Promise<{ checkpoints: Checkpoint[]; more: boolean }> {
  const checkpoints: Checkpoint[] = [];
  for await (const checkpoint of client().threads.checkpoints(threadId, { pageSize: 100 })) {
    if (checkpoints.length === MAX_CHECKPOINTS) {
      return { checkpoints, more: true };
    }
    checkpoints.push(checkpoint);
  }
  return { checkpoints, more: false };
}

/** Show the open thread (or the empty panel). */
function render(): void {
  const open = app.open;
  byId("thread-empty", HTMLElement).hidden = open !== undefined;
  byId("thread-view", HTMLElement).hidden = open === undefined;
  if (open === undefined) {
    return;
  }
  const { thread } = open;
  const status = enumName(ThreadStatus, thread.status);
  byId("thread-title", HTMLElement).textContent = thread.threadId;
  byId("thread-revision", HTMLElement).textContent = `Revision ${thread.revision}`;
  const statusElement = byId("thread-status", HTMLElement);
  statusElement.textContent = status;
  statusElement.className = `status status-${status.toLowerCase()}`;
  const created = timeText(thread.createTime);
  const facts: (string | Node)[] = [`agent ${thread.agent}`];
  if (created !== undefined) {
    facts.push(" · created ", h("time", { datetime: created.iso }, created.text));
  }
  if (thread.lease !== undefined) {
    facts.push(" · running ", h("code", {}, thread.lease.runId));
  }
  if (thread.queue.length > 0) {
    facts.push(` · ${thread.queue.length} request${thread.queue.length === 1 ? "" : "s"} queued`);
  }
  if (thread.recoveryPending) {
    facts.push(" · recovery pending (the next run recovers the last one)");
  }
  byId("thread-facts", HTMLElement).replaceChildren(...facts);
  const labels = labelItems(thread.labels);
  const labelNodes = labels.length === 0 ? ["no labels"] : labels.map((label) => h("span", { class: "tag" }, label));
  byId("thread-labels", HTMLElement).replaceChildren(...labelNodes);

  const items = open.checkpoints.map((checkpoint) => checkpointItem(checkpoint, thread.revision));
  const more = open.more ? h("li", { class: "muted" }, `Only the newest ${MAX_CHECKPOINTS} are listed.`) : null;
  replaceContent(byId("checkpoints", HTMLOListElement), [...items, more], byId("thread-title", HTMLElement));
  const context = { pending: thread.pending, category: (tool: string) => toolCategory(thread.agent, tool) };
  replaceContent(byId("conversation", HTMLElement), renderConversation(thread.head?.state?.messageHistory?.data, context));
  renderPending(byId("pending", HTMLElement), thread.pending, submitAnswers, byId("prompt", HTMLTextAreaElement));
  updateControls();
}

/** Empty what showed a thread no longer open, so nothing of it stays in the page (hidden or not). */
function clearView(): void {
  const parts = ["thread-title", "thread-revision", "thread-status", "thread-facts", "thread-labels", "thread-note"];
  for (const id of [...parts, "conversation", "checkpoints", "pending", "live"]) {
    byId(id, HTMLElement).replaceChildren();
  }
  delete byId("pending", HTMLElement).dataset["batch"];
}

/** One checkpoint of the timeline: revision, kind, status, run, time, request, and its Fork / Roll back buttons. */
function checkpointItem(checkpoint: Checkpoint, headRevision: bigint): HTMLLIElement {
  const revision = String(checkpoint.revision);
  const kind = enumName(CheckpointKind, checkpoint.kind);
  const pending = [...(checkpoint.pending?.approvals ?? []), ...(checkpoint.pending?.calls ?? [])];
  const status = pending.length > 0 ? "SUSPENDED" : "IDLE";
  const when = timeText(checkpoint.createTime);
  const isHead = checkpoint.revision === headRevision;
  return h(
    "li",
    { class: `checkpoint kind-${kind.toLowerCase()}${isHead ? " head" : ""}`, "data-revision": revision },
    h(
      "p",
      { class: "checkpoint-head" },
      h("span", { class: "rev" }, `#${revision}`),
      " ",
      h("span", { class: "tag" }, kind),
      " ",
      h("span", { class: `status status-${status.toLowerCase()}` }, status),
      pending.length > 0 ? h("span", { class: "small" }, ` on ${pending.map((call) => call.toolName).join(", ")}`) : null,
      isHead ? h("span", { class: "tag good" }, "head") : null,
    ),
    h(
      "p",
      { class: "small muted checkpoint-facts" },
      when === undefined ? "" : h("time", { datetime: when.iso }, when.text),
      checkpoint.runId === "" ? "" : h("span", {}, " · ", h("code", {}, checkpoint.runId)),
      checkpoint.requestId === "" ? "" : h("span", {}, " · ", h("code", {}, checkpoint.requestId)),
    ),
    h(
      "p",
      { class: "row" },
      h("button", { type: "button", "data-action": "fork", "data-revision": revision, "data-key": `fork:${revision}` }, `Fork at ${revision}`),
      h(
        "button",
        { type: "button", "data-action": "rollback", "data-revision": revision, "data-key": `rollback:${revision}` },
        `Roll back to ${revision}`,
      ),
    ),
  );
}

/** Enable what can be done now: Run and Submit answers unless a run streams here; Cancel run while one runs. */
function updateControls(): void {
  const open = app.open;
  const streaming = app.run !== undefined && app.run.threadId === open?.thread.threadId;
  byId("run", HTMLButtonElement).disabled = streaming;
  const submit = document.getElementById("submit-answers");
  if (submit instanceof HTMLButtonElement) {
    submit.disabled = streaming;
  }
  const running = open?.thread.status === ThreadStatus.RUNNING && open.thread.lease !== undefined;
  byId("cancel-run", HTMLButtonElement).disabled = !((streaming && app.run?.runId !== "") || running);
}

/** Run: the Prompt (and any client tools) as the thread's next turn. */
async function runPrompt(): Promise<void> {
  const prompt = byId("prompt", HTMLTextAreaElement);
  const text = prompt.value;
  const names = byId("client-tools", HTMLInputElement)
    .value.split(/[,\s]+/)
    .filter((name) => name !== "");
  const clientTools = names.map((name) => ({ name, parametersJsonSchema: OPEN_SCHEMA }));
  const title = text.trim() === "" ? "Continuing without a prompt" : `Prompt: ${text}`;
  const ended = await runTurn(text.trim() === "" ? { clientTools } : { text, clientTools }, title);
  if (ended && prompt.value === text) {
    prompt.value = "";
  }
}

/** Submit answers: the whole batch's answers in one turn. */
async function submitAnswers(list: Answer[]): Promise<void> {
  const count = list.length;
  await runTurn({ answers: answers(...list) }, `Answering ${count} pending call${count === 1 ? "" : "s"}`);
}

/** What a turn sends besides the head revision: a prompt (or none) with client tools, or answers. */
type TurnInput = Pick<ThreadRunInput, "text" | "clientTools" | "answers">;

/**
 * Run one turn of the open thread and stream it into the Live output (`threads.stream`, with
 * `expectedRevision` = the revision shown); then show the thread as the turn left it. Returns
 * whether the turn ran to its result.
 */
async function runTurn(input: TurnInput, title: string): Promise<boolean> {
  const open = app.open;
  if (open === undefined) {
    return false;
  }
  if (app.run !== undefined) {
    throw new Error("A run is already streaming here; wait for it or cancel it.");
  }
  clearError("thread");
  const threadId = open.thread.threadId;
  const controller = new AbortController();
  const view = startLive(byId("live", HTMLElement), title);
  const stream = client().threads.stream(threadId, { ...input, expectedRevision: open.thread.revision, signal: controller.signal });
  return follow({ controller, threadId, runId: "", view }, stream);
}

/** Follow the run a RUNNING thread's lease names (started elsewhere), when the server keeps event logs. */
async function joinRunning(): Promise<void> {
  const thread = app.open?.thread;
  if (thread?.lease === undefined || app.info?.threadStore?.eventLog !== true) {
    return;
  }
  const { threadId } = thread;
  const { runId } = thread.lease;
  const controller = new AbortController();
  const view = startLive(byId("live", HTMLElement), `Following run ${runId} (started elsewhere)`);
  await follow({ controller, threadId, runId, view }, client().threads.joinRun(threadId, { runId, signal: controller.signal }));
}

/**
 * Show a run's events until it ends, with Cancel run enabled once its run ID is known; then reload
 * the thread and the list if the run got anywhere. A refusal (busy, conflict) is shown as the
 * thread's error; a stream this page stopped (another thread opened) just says so.
 */
async function follow(run: FollowedRun, events: AsyncIterable<RunEvent>): Promise<boolean> {
  const { view } = run;
  app.run = run;
  updateControls();
  let started = false;
  let ended = false;
  try {
    for await (const event of events) {
      started = true;
      if (run.runId !== event.runId) {
        run.runId = event.runId;
        updateControls();
      }
      view.event(event);
      ended ||= event.event.case === "result";
    }
  } catch (err) {
    if (run.controller.signal.aborted) {
      view.note("Stopped following this run here; it goes on on the server.");
      return false;
    }
    view.note("The run was refused or its stream failed: see the error above.", "bad");
    fail(err);
  } finally {
    if (app.run === run) {
      app.run = undefined;
    }
    updateControls();
  }
  if (started && app.open?.thread.threadId === run.threadId) {
    await reloadThread();
    await loadThreads().catch((err: unknown) => showError("threads", err));
  }
  // Run, Submit answers and Cancel run were disabled (or removed) under the keyboard's focus while
  // the run streamed: give focus back where the next turn starts.
  if (document.activeElement === null || document.activeElement === document.body) {
    byId("prompt", HTMLTextAreaElement).focus();
  }
  return ended;
}

/** Cancel run: ask the running run to stop (it ends CANCELLED with its progress committed). */
async function cancelRun(): Promise<void> {
  const open = app.open;
  const runId = app.run?.threadId === open?.thread.threadId && app.run?.runId ? app.run.runId : (open?.thread.lease?.runId ?? "");
  if (open === undefined || runId === "") {
    return;
  }
  if (!(await confirmAction(`Cancel run ${runId}?`, "It stops at once and ends CANCELLED; what it did so far stays committed."))) {
    return;
  }
  clearError("thread");
  const status = await client().threads.cancel(open.thread.threadId, runId);
  const text = `Cancel asked: the run is ${enumName(ThreadRunStatus, status)}.`;
  if (app.run !== undefined) {
    app.run.view.note(text, "warn");
  } else {
    await reloadThread();
    byId("thread-note", HTMLElement).replaceChildren(text);
  }
}

/** Fork at N: a new thread from checkpoint N (this thread is not changed); offer to open it. */
async function forkAt(revision: bigint): Promise<void> {
  const open = app.open;
  if (open === undefined) {
    return;
  }
  const threadId = open.thread.threadId;
  const question = `Fork ${threadId} at checkpoint ${revision}?`;
  const detail = "A new thread starts from this checkpoint, with the same agent (suspended on the same calls if it was). This thread is not changed.";
  if (!(await confirmAction(question, detail))) {
    return;
  }
  clearError("thread");
  const fork = await client().threads.fork(threadId, { revision });
  byId("thread-note", HTMLElement).replaceChildren(
    `Forked checkpoint ${revision} into `,
    h("code", {}, fork.threadId),
    ". ",
    h("button", { type: "button", "data-open": fork.threadId }, "Open forked thread"),
  );
  await loadThreads().catch((err: unknown) => showError("threads", err));
}

/** Roll back to N: a new head copying checkpoint N, if the head is still the one shown. */
async function rollbackTo(revision: bigint): Promise<void> {
  const open = app.open;
  if (open === undefined) {
    return;
  }
  const { threadId, revision: head } = open.thread;
  const question = `Roll ${threadId} back to checkpoint ${revision}?`;
  const detail = `A new head (#${head + 1n}, ROLLED_BACK) copies checkpoint ${revision}; nothing is deleted. Refused unless the head is still #${head}.`;
  if (!(await confirmAction(question, detail))) {
    return;
  }
  clearError("thread");
  const thread = await client().threads.rollback(threadId, revision, { expectedRevision: head });
  await reloadThread();
  byId("thread-note", HTMLElement).replaceChildren(`Rolled back: checkpoint ${revision} copied as the new head #${thread.revision}.`);
  await loadThreads().catch((err: unknown) => showError("threads", err));
}

/** Delete thread, if the head is still the one shown. */
async function deleteThread(): Promise<void> {
  const open = app.open;
  if (open === undefined) {
    return;
  }
  const { threadId, revision } = open.thread;
  const detail = `Its checkpoints and run records are deleted for good. Refused unless the head is still #${revision}.`;
  if (!(await confirmAction(`Delete thread ${threadId}?`, detail))) {
    return;
  }
  clearError("thread");
  await client().threads.delete(threadId, { expectedRevision: revision });
  app.loadSequence++;
  app.open = undefined;
  history.replaceState(null, "", `${location.pathname}${location.search}`);
  render();
  clearView();
  byId("thread-gone", HTMLElement).textContent = `Deleted thread ${threadId}.`;
  markCurrent();
  await loadThreads().catch((err: unknown) => showError("threads", err));
  byId("thread-empty-title", HTMLElement).focus();
}
