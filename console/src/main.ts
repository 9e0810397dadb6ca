/**
 * The Threadline web console: a single page over the server's HTTP port (Connect over `fetch`,
 * the TypeScript SDK as a browser bundle), with three regions: Server, Threads and Thread.
 *
 * This module only starts things: it shows any error from here on, connects with the token kept
 * for this tab, wires the panels, then reads the server, the list and the thread named in the URL
 * (`#thread=ID`).
 *
 * @module
 */

import { connect, loadToken, saveToken, serverUrl } from "./api.js";
import { byId } from "./dom.js";
import { clearError, guard, installGlobalHandlers, showError } from "./errors.js";
import { loadServer } from "./server.js";
import { app } from "./state.js";
import { bindThread, openThread } from "./thread.js";
import { bindThreads, loadThreads } from "./threads.js";

/**
 * Read everything the page shows from the server (at start, and after the token changed). The
 * thread waits for the server's description: its conversation marks approval tools by category,
 * and a running thread's run is joined only where the server keeps event logs.
 */
async function loadAll(): Promise<void> {
  const threadId = app.open?.thread.threadId ?? threadInUrl();
  const server = loadServer().catch((err: unknown) => showError("server", err));
  await Promise.all([
    server,
    loadThreads().catch((err: unknown) => showError("threads", err)),
    threadId === undefined ? undefined : server.then(() => openThread(threadId)).catch((err: unknown) => showError("thread", err)),
  ]);
}

/** The thread the URL names (`#thread=ID`), so a reload or a shared link opens it again. */
function threadInUrl(): string | undefined {
  const match = /^#thread=(.+)$/.exec(location.hash);
  return match?.[1] === undefined ? undefined : decodeURIComponent(match[1]);
}

function start(): void {
  installGlobalHandlers();
  app.baseUrl = serverUrl(location);
  app.token = loadToken();
  byId("server-address", HTMLElement).textContent = `Server: ${app.baseUrl}`;
  const tokenInput = byId("token", HTMLInputElement);
  tokenInput.value = app.token;
  connect();

  // A new token takes effect as soon as the field changes (before a click elsewhere acts), and
  // everything is read again with it; Use token (or Enter) does the same on purpose.
  const useToken = guard("server", async () => {
    app.token = tokenInput.value;
    saveToken(app.token);
    connect();
    clearError("page");
    await loadAll();
  });
  tokenInput.addEventListener("change", useToken);
  byId("token-form", HTMLFormElement).addEventListener("submit", useToken);
  byId("server-check", HTMLButtonElement).addEventListener("click", guard("server", loadServer));
  bindThreads((threadId) => openThread(threadId, { focus: true }));
  bindThread();
  void loadAll();
}

try {
  start();
} catch (err) {
  showError("page", err);
}
