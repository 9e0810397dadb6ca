// The web console (`threadline serve --http-port N --console`, console/) in the distribution's Chromium,
// headless, against a live server: the whole approval flow — create a thread, run
// `delete old.txt`, see the pending approval, approve it, see the result and the new checkpoint, fork,
// roll back, and a stale revision refused — through the page's accessible names, as a person with a
// keyboard or a screen reader meets them. Screenshots go to `test-artifacts/console/` (or
// `$THREADLINE_ARTIFACTS`).

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import type { Browser, Page } from "playwright-core";

import { createThreadlineClient } from "../src/index.js";
import { launchChromium } from "./chromium.js";
import { type TestServer, httpPort, startServer } from "./server.js";

const ARTIFACTS = process.env["THREADLINE_ARTIFACTS"] ?? fileURLToPath(new URL("../test-artifacts/console/", import.meta.url));
const TIMEOUT = 30_000;

let server: TestServer;
let consoleUrl: string;
let browser: Browser;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await startServer(["--http-port", "0", "--console"]);
  const port = await httpPort(server);
  consoleUrl = `http://127.0.0.1:${port}/`;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

async function confirm(page: Page): Promise<void> {
  const dialog = page.getByRole("dialog");
  await dialog.getByRole("button", { name: "Confirm" }).click();
  await dialog.waitFor({ state: "hidden", timeout: TIMEOUT });
}

function region(page: Page, name: string) {
  return page.getByRole("region", { name, exact: true });
}

/** Wait until `check()` holds (polled; the page's CSP rules out evaluating strings in it). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + TIMEOUT;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function revisionOf(page: Page): Promise<number> {
  const text = (await region(page, "Thread").getByText(/^Revision \d+$/).textContent()) ?? "";
  return Number(text.replace("Revision ", ""));
}

test("the console runs the whole approval flow, forks, rolls back and shows a stale revision's error", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  await page.goto(consoleUrl);
  assert.equal(await page.title(), "Threadline console");
  await region(page, "Server").getByText("default", { exact: false }).first().waitFor({ timeout: TIMEOUT });
  await region(page, "Server").getByText("delete_file").first().waitFor({ timeout: TIMEOUT });

  // A new thread, opened.
  const threads = region(page, "Threads");
  await threads.getByLabel("Thread ID").fill("console_demo");
  await threads.getByRole("button", { name: "New thread" }).click();
  const thread = region(page, "Thread");
  await thread.getByRole("heading", { name: "console_demo" }).waitFor({ timeout: TIMEOUT });
  const created = await revisionOf(page);

  // A turn that needs an approval: the pending approval is there to answer.
  await thread.getByLabel("Prompt").fill("delete old.txt");
  await thread.getByRole("button", { name: "Run", exact: true }).click();
  const live = thread.getByRole("log").or(thread.locator("[aria-live]")).first();
  await live.getByText("SUSPENDED").first().waitFor({ timeout: TIMEOUT });
  const pending = region(page, "Pending");
  await pending.getByRole("button", { name: "Approve delete_file" }).waitFor({ timeout: TIMEOUT });
  await shot(page, "1-pending-approval");

  // Approve it: the result streams, a new checkpoint lands, the conversation shows the tool's result.
  await pending.getByRole("button", { name: "Approve delete_file" }).click();
  await pending.getByRole("button", { name: "Submit answers" }).click();
  await live.getByText("COMPLETED").first().waitFor({ timeout: TIMEOUT });
  await region(page, "Conversation").getByText("Deleted old.txt").first().waitFor({ timeout: TIMEOUT });
  const approved = await revisionOf(page);
  assert.ok(approved > created, `revision ${approved} after ${created}`);
  const checkpoints = thread.getByRole("list", { name: "Checkpoints" });
  await checkpoints.getByRole("button", { name: `Fork at ${approved}` }).waitFor({ timeout: TIMEOUT });
  await shot(page, "2-approved");

  // Fork at the head: a new thread appears in the list.
  const rowsBefore = await threads.getByRole("row").count();
  await checkpoints.getByRole("button", { name: `Fork at ${approved}` }).click();
  await confirm(page);
  await threads.getByRole("button", { name: "Refresh" }).click();
  await until("the fork in the list", async () => (await threads.getByRole("row").count()) > rowsBefore);

  // Roll back the original to its first checkpoint: a new head, the conversation as it was then.
  await threads.getByRole("button", { name: "console_demo", exact: true }).click();
  await thread.getByRole("heading", { name: "console_demo" }).waitFor({ timeout: TIMEOUT });
  await checkpoints.getByRole("button", { name: `Roll back to ${created}` }).click();
  await confirm(page);
  await until("the rollback's new head", async () => (await revisionOf(page)) > approved);
  await shot(page, "3-rolled-back");

  // Another host moves the thread on; the console's next turn names the revision it shows and is refused.
  const host = createThreadlineClient({ baseUrl: server.baseUrl, timeoutMs: TIMEOUT });
  try {
    await host.threads.run("console_demo", { text: "hello from another host" });
  } finally {
    host.close();
  }
  await thread.getByLabel("Prompt").fill("hello again");
  await thread.getByRole("button", { name: "Run", exact: true }).click();
  const alert = page.getByRole("alert").filter({ hasText: "REVISION_CONFLICT" });
  await alert.waitFor({ timeout: TIMEOUT });
  await shot(page, "4-stale-revision");
  await alert.getByRole("button", { name: "Reload thread" }).click();
  await page.getByRole("alert").filter({ hasText: "REVISION_CONFLICT" }).waitFor({ state: "hidden", timeout: TIMEOUT });

  // Keyboard: the controls are reachable with Tab, and focus lands on real controls.
  await page.keyboard.press("Tab");
  const focused = page.locator("a:focus, button:focus, input:focus, select:focus, textarea:focus");
  assert.equal(await focused.count(), 1, "Tab moves the focus to a control");

  // A narrow window: the panels stack, nothing needs a horizontal scroll.
  await page.setViewportSize({ width: 400, height: 800 });
  const overflow = await page.locator("html").evaluate((html) => html.scrollWidth - html.clientWidth);
  assert.ok(overflow <= 1, `${overflow}px of horizontal overflow at 400px`);
  await shot(page, "5-narrow");
  assert.deepEqual(errors, []);
  await page.close();
});
