// The real server for the suites: the one `THREADLINE_ADDR` names, or `threadline serve --port 0`
// started from the repo root, whose first stdout line is `listening on <host>:<port>`.

import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repository root (this file is `clients/typescript/test/server.ts`). */
export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

/** A server the tests talk to. */
export interface TestServer {
  /** `http://host:port`. */
  readonly baseUrl: string;
  /** Stop the server if the suite started it; a no-op for `THREADLINE_ADDR`. */
  stop(): Promise<void>;
}

/** The address in `THREADLINE_ADDR`, or undefined when the suites start their own server. */
export const SERVER_ADDR = process.env["THREADLINE_ADDR"] || undefined;

/**
 * Use `THREADLINE_ADDR` when set, else start `<repo>/.venv/bin/threadline serve --port 0`.
 *
 * @param extraArgs - More `serve` flags; giving any always starts a server of our own.
 */
export async function startServer(extraArgs: string[] = []): Promise<TestServer> {
  if (SERVER_ADDR !== undefined && extraArgs.length === 0) {
    return { baseUrl: /^https?:\/\//.test(SERVER_ADDR) ? SERVER_ADDR : `http://${SERVER_ADDR}`, stop: async () => {} };
  }
  const executable = `${REPO_ROOT}.venv/bin/threadline`;
  if (!existsSync(executable)) {
    throw new Error(`${executable} does not exist: run scripts/setup.sh, or set THREADLINE_ADDR`);
  }
  // Every server of the suite keeps its threads in memory unless the caller names a store.
  const store = extraArgs.includes("--store") ? [] : ["--store", "memory"];
  const child = spawn(executable, ["serve", "--port", "0", ...store, ...extraArgs], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  // Keep the last log lines (JSON on stderr) to explain a failed start; reading also keeps the
  // pipe from filling up.
  const logs: string[] = [];
  createInterface({ input: child.stderr! }).on("line", (line) => {
    logs.push(line);
    if (logs.length > 50) logs.shift();
  });
  try {
    const address = await firstLine(child);
    const match = /^listening on (\S+)$/.exec(address);
    if (match === null) {
      throw new Error(`unexpected first line from threadline serve: ${JSON.stringify(address)}`);
    }
    return { baseUrl: `http://${match[1]}`, stop: () => stop(child) };
  } catch (err) {
    await stop(child);
    throw new Error(`threadline serve did not start: ${String(err)}\n${logs.join("\n")}`);
  }
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`no address within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    lines.once("line", (line) => {
      clearTimeout(timer);
      // Drain the rest of stdout so the server never blocks on a full pipe.
      child.stdout!.resume();
      resolve(line.trim());
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`exited early (code ${code}, signal ${signal})`));
    });
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return;
  }
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}
