// The SDK in a real browser: `test/browser/scenario.ts` bundled by esbuild for the `browser` condition
// (so the client speaks Connect over `fetch`), loaded from a page of another origin into the
// distribution's Chromium (headless, driven by playwright-core; `scripts/setup.sh` installs it, no
// browser is downloaded), against `threadline serve --http-port` with that origin in
// `--http-cors-origin`: CORS, the transport and the scenario helpers, as a web application meets them.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type Server, createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import { build } from "esbuild";

import { launchChromium } from "./chromium.js";
import { type TestServer, httpPort, startServer } from "./server.js";

/** What the page reports (`test/browser/scenario.ts`'s `ScenarioReport`). */
interface ScenarioReport {
  readonly steps: string[];
  readonly error?: string;
}
type Reporting = typeof globalThis & { threadlineScenario?: ScenarioReport };

let page: { server: Server; origin: string; dir: string };
let threadline: TestServer;
let httpUrl: string;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "threadline-browser-"));
  await build({
    entryPoints: [fileURLToPath(new URL("./browser/scenario.ts", import.meta.url))],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    outfile: join(dir, "scenario.js"),
    logLevel: "error",
  });
  writeFileSync(join(dir, "index.html"), '<!doctype html><meta charset="utf-8"><script type="module" src="scenario.js"></script>');
  const server = createServer((request, response) => {
    const name = request.url?.startsWith("/scenario.js") ? "scenario.js" : "index.html";
    response.writeHead(200, { "content-type": name.endsWith(".js") ? "text/javascript" : "text/html" });
    response.end(readFileSync(join(dir, name)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address === "object");
  page = { server, origin: `http://127.0.0.1:${address.port}`, dir };
  threadline = await startServer(["--http-port", "0", "--http-cors-origin", page.origin]);
  const port = await httpPort(threadline);
  httpUrl = `http://127.0.0.1:${port}`;
});

after(async () => {
  page?.server.close();
  if (page !== undefined) {
    rmSync(page.dir, { recursive: true, force: true });
  }
  await threadline?.stop();
});

test("the SDK runs a scenario in Chromium over Connect, from another origin", async () => {
  const browser = await launchChromium();
  try {
    const tab = await browser.newPage();
    await tab.goto(`${page.origin}/?server=${encodeURIComponent(httpUrl)}`);
    await tab.waitForFunction(() => (globalThis as Reporting).threadlineScenario !== undefined, undefined, {
      timeout: 60_000,
    });
    const report = (await tab.evaluate(() => (globalThis as Reporting).threadlineScenario)) as ScenarioReport;
    assert.equal(report.error, undefined, `${report.error} after ${JSON.stringify(report.steps)}`);
    assert.equal(report.steps[0], "server default");
    assert.match(report.steps[1] ?? "", /^streamed COMPLETED with [1-9]\d* checkpoints$/);
    assert.equal(report.steps[2], "suspended on delete_file");
    assert.match(report.steps[3] ?? "", /^approved: COMPLETED .*Deleted old\.txt/);
    assert.equal(report.steps[4], "refused Aborted REVISION_CONFLICT");
  } finally {
    await browser.close();
  }
});
