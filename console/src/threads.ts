/**
 * The Threads panel: a new thread, the list (labels, status, head revision) filtered by label and
 * status, one page at a time, each row's button opening its thread.
 *
 * @module
 */

import { Code, type Thread, ThreadStatus, ThreadlineError } from "../../clients/typescript/src/index.js";
import { byId, h, replaceContent, whileBusy } from "./dom.js";
import { clearError, guard } from "./errors.js";
import { enumName, labelItems, parseLabels, timeText } from "./format.js";
import { app, client } from "./state.js";

/** Threads per page: enough to scan, few enough to read on a narrow window. */
const PAGE_SIZE = 20;

/** The statuses the Status select offers, by option value. */
const STATUS_BY_VALUE: Readonly<Record<string, ThreadStatus>> = {
  "": ThreadStatus.UNSPECIFIED,
  IDLE: ThreadStatus.IDLE,
  RUNNING: ThreadStatus.RUNNING,
  SUSPENDED: ThreadStatus.SUSPENDED,
};

/**
 * Wire the panel's controls. `open` opens a thread in the Thread panel (the rows' buttons, and a
 * thread just created).
 */
export function bindThreads(open: (threadId: string) => Promise<void>): void {
  const newForm = byId("new-thread-form", HTMLFormElement);
  newForm.addEventListener(
    "submit",
    guard("threads", async (event) => {
      clearError("threads");
      const idInput = byId("new-thread-id", HTMLInputElement);
      const labels = parseLabels(byId("new-thread-labels", HTMLInputElement).value);
      const thread = await whileBusy(submitter(event), () => client().threads.create({ threadId: idInput.value.trim(), labels }));
      idInput.value = "";
      await open(thread.threadId);
      await loadThreads();
    }),
  );
  byId("filter-form", HTMLFormElement).addEventListener(
    "submit",
    guard("threads", async () => {
      readFilters();
      app.list.pageToken = "";
      app.list.page = 1;
      await loadThreads();
    }),
  );
  byId("status-filter", HTMLSelectElement).addEventListener(
    "change",
    guard("threads", async () => {
      readFilters();
      app.list.pageToken = "";
      app.list.page = 1;
      await loadThreads();
    }),
  );
  byId("next-page", HTMLButtonElement).addEventListener(
    "click",
    guard("threads", async () => {
      if (app.list.nextPageToken === "") {
        return;
      }
      app.list.pageToken = app.list.nextPageToken;
      app.list.page += 1;
      await loadThreads();
    }),
  );
  byId("first-page", HTMLButtonElement).addEventListener(
    "click",
    guard("threads", async () => {
      app.list.pageToken = "";
      app.list.page = 1;
      await loadThreads();
    }),
  );
  byId("thread-rows", HTMLElement).addEventListener(
    "click",
    guard("threads", async (event) => {
      const button = event.target instanceof Element ? event.target.closest<HTMLButtonElement>("button[data-thread]") : null;
      const threadId = button?.dataset["thread"];
      if (threadId !== undefined) {
        await open(threadId);
      }
    }),
  );
}

/** The button that submitted a form, to mark it busy. */
function submitter(event: Event): HTMLButtonElement | null {
  return event instanceof SubmitEvent && event.submitter instanceof HTMLButtonElement ? event.submitter : null;
}

/** Take the filters from their fields (a label filter that does not parse throws, and is shown). */
function readFilters(): void {
  app.list.labels = parseLabels(byId("label-filter", HTMLInputElement).value);
  app.list.status = STATUS_BY_VALUE[byId("status-filter", HTMLSelectElement).value] ?? ThreadStatus.UNSPECIFIED;
}

/** Read the current page with the current filters and show it. */
export async function loadThreads(): Promise<void> {
  clearError("threads");
  const rows = byId("thread-rows", HTMLElement);
  const table = byId("thread-table", HTMLTableElement);
  table.setAttribute("aria-busy", "true");
  try {
    const { labels, status, pageToken } = app.list;
    let page;
    try {
      page = await client().threads.listPage({ labels, status, pageSize: PAGE_SIZE, pageToken });
    } catch (err) {
      if (!(err instanceof ThreadlineError && err.code === Code.Unimplemented)) {
        throw err;
      }
      // Not a failure: the server keeps no threads.
      app.list.nextPageToken = "";
      replaceContent(rows, [h("tr", {}, h("td", { colspan: 5, class: "muted" }, "This server keeps no threads (it runs with --store none)."))]);
      byId("threads-note", HTMLElement).textContent = "";
      return;
    }
    app.list.nextPageToken = page.nextPageToken;
    replaceContent(
      rows,
      page.threads.length === 0
        ? [h("tr", {}, h("td", { colspan: 5, class: "muted" }, pageToken === "" ? "No threads." : "No more threads."))]
        : page.threads.map(row),
      byId("first-page", HTMLButtonElement),
    );
    const count = page.threads.length;
    byId("threads-note", HTMLElement).textContent =
      `Page ${app.list.page}: ${count} thread${count === 1 ? "" : "s"}${page.nextPageToken === "" ? "" : ", more on the next page"}.`;
  } finally {
    table.removeAttribute("aria-busy");
    byId("next-page", HTMLButtonElement).disabled = app.list.nextPageToken === "";
    byId("first-page", HTMLButtonElement).disabled = app.list.pageToken === "";
  }
}

/** One thread's row: its ID as the button that opens it, status, head revision, labels, last change. */
function row(thread: Thread): HTMLTableRowElement {
  const isOpen = app.open?.thread.threadId === thread.threadId;
  const updated = timeText(thread.updateTime);
  const status = enumName(ThreadStatus, thread.status);
  return h(
    "tr",
    { class: isOpen ? "current" : "" },
    h(
      "td",
      { "data-label": "Thread ID" },
      h(
        "button",
        { type: "button", class: "link", "data-thread": thread.threadId, "data-key": `open:${thread.threadId}`, "aria-current": isOpen ? "true" : null },
        thread.threadId,
      ),
    ),
    h("td", { "data-label": "Status" }, h("span", { class: `status status-${status.toLowerCase()}` }, status)),
    h("td", { "data-label": "Revision" }, String(thread.revision)),
    h("td", { "data-label": "Labels" }, ...labelItems(thread.labels).map((label) => h("span", { class: "tag" }, label))),
    h("td", { "data-label": "Updated" }, updated === undefined ? "—" : h("time", { datetime: updated.iso }, updated.text)),
  );
}

/** Mark the open thread's row (after a thread opens or closes), without reading the list again. */
export function markCurrent(): void {
  const openId = app.open?.thread.threadId;
  for (const button of byId("thread-rows", HTMLElement).querySelectorAll<HTMLButtonElement>("button[data-thread]")) {
    const isOpen = button.dataset["thread"] === openId;
    button.closest("tr")?.classList.toggle("current", isOpen);
    if (isOpen) {
      button.setAttribute("aria-current", "true");
    } else {
      button.removeAttribute("aria-current");
    }
  }
}
