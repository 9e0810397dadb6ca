// One scenario of the suite in a browser page, on the SDK as a bundler's `browser` condition builds it
// (Connect over `fetch` to the server's HTTP port). `test/browser.test.ts` bundles this file, serves it
// and reads `window.threadlineScenario` from headless Chromium.

import {
  Code,
  RunStatus,
  ThreadlineError,
  answers,
  approve,
  collectRun,
  createThreadlineClient,
} from "../../src/index.js";

export interface ScenarioReport {
  readonly steps: string[];
  readonly error?: string;
}

async function scenario(baseUrl: string, steps: string[]): Promise<void> {
  const client = createThreadlineClient({ baseUrl, timeoutMs: 30_000 });
  const info = await client.getServerInfo();
  steps.push(`server ${info.defaultAgent}`);

  // A streamed run with checkpoints: their deltas are rebuilt and checked (SHA-256) in the page.
  const { events, result } = await collectRun(client.streamRun({ prompt: "hello from a browser", checkpoints: true }));
  const candidates = events.filter((event) => event.event.case === "checkpointCandidate").length;
  steps.push(`streamed ${RunStatus[result.status]} with ${candidates} checkpoints`);

  // A durable thread: a turn that needs an approval, approved by call ID.
  const thread = await client.threads.create();
  const asked = await client.threads.run(thread.threadId, { text: "delete old.txt" });
  const approval = asked.result.deferred?.approvals[0];
  if (approval === undefined) {
    throw new Error(`no approval pending: ${RunStatus[asked.result.status]}`);
  }
  steps.push(`suspended on ${approval.toolName}`);
  const done = await client.threads.run(thread.threadId, { answers: answers(approve(approval)) });
  steps.push(`approved: ${RunStatus[done.result.status]} ${done.result.outputJson}`);

  // A typed refusal: a turn against a stale revision.
  try {
    await client.threads.run(thread.threadId, { text: "again", expectedRevision: asked.revision });
    steps.push("stale revision accepted");
  } catch (err) {
    if (!(err instanceof ThreadlineError)) {
      throw err;
    }
    steps.push(`refused ${Code[err.code]} ${err.reason}`);
  }
  client.close();
}

declare global {
  interface Window {
    threadlineScenario?: ScenarioReport;
  }
}

const steps: string[] = [];
const baseUrl = new URLSearchParams(window.location.search).get("server") ?? "";
scenario(baseUrl, steps).then(
  () => {
    window.threadlineScenario = { steps };
  },
  (err: unknown) => {
    window.threadlineScenario = { steps, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  },
);
