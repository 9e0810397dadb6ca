// The browser the browser tests drive: Debian's Chromium, as `scripts/setup.sh` installs it (no browser
// is downloaded), headless, with the flags a machine whose network reaches only localhost needs.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";

import { type Browser, chromium } from "playwright-core";

/** Where Chromium is (`THREADLINE_CHROMIUM` for another one). */
export const CHROMIUM = process.env["THREADLINE_CHROMIUM"] ?? "/usr/bin/chromium";
const ARGS = [
  "--headless=new",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A headless Chromium; fails with how to install it when it is missing. */
export async function launchChromium(): Promise<Browser> {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} does not exist: scripts/setup.sh installs Debian's chromium`);
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}
