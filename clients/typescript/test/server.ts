// The real server for the suites: the one `THREADLINE_ADDR` names, or `threadline serve --port 0`
// started from the repo root, whose first stdout line is `listening on <host>:<port>`.

import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { type Interface, createInterface } from "node:readline";
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
  /**
   * The first `find(line)` that is not undefined, over the server's stderr lines so far and then
   * as they come; rejects (naming `what`) after `timeoutMs`, and for a server the suite did not start.
   */
  waitForLine<T>(what: string, find: (line: string) => T | undefined, timeoutMs: number): Promise<T>;
}

/** How to start a server of our own. */
export interface ServerOptions {
  /** More environment variables for the server (the suite's own environment is kept). */
  env?: Record<string, string>;
}

/** The address in `THREADLINE_ADDR`, or undefined when the suites start their own server. */
export const SERVER_ADDR = process.env["THREADLINE_ADDR"] || undefined;

/**
 * Use `THREADLINE_ADDR` when set, else start `<repo>/.venv/bin/threadline serve --port 0`.
 *
 * @param extraArgs - More `serve` flags; giving any always starts a server of our own.
 * @param options - Giving `env` always starts a server of our own, too.
 */
export async function startServer(extraArgs: string[] = [], options: ServerOptions = {}): Promise<TestServer> {
  if (SERVER_ADDR !== undefined && extraArgs.length === 0 && options.env === undefined) {
    return {
      baseUrl: /^https?:\/\//.test(SERVER_ADDR) ? SERVER_ADDR : `http://${SERVER_ADDR}`,
      stop: async () => {},
      waitForLine: () => Promise.reject(new Error("the logs of THREADLINE_ADDR's server are not readable here")),
    };
  }
  const executable = `${REPO_ROOT}.venv/bin/threadline`;
  if (!existsSync(executable)) {
    throw new Error(`${executable} does not exist: run scripts/setup.sh, or set THREADLINE_ADDR`);
  }
  // Every server of the suite keeps its threads in memory unless the caller names a store.
  const store = extraArgs.includes("--store") ? [] : ["--store", "memory"];
  const child = spawn(executable, ["serve", "--port", "0", ...store, ...extraArgs], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Keep the log lines (JSON on stderr) for `waitForLine` and to explain a failed start; reading
  // also keeps the pipe from filling up.
  const logs: string[] = [];
  const stderr = createInterface({ input: child.stderr! });
  stderr.on("line", (line) => logs.push(line));
  try {
    const address = await firstLine(child);
    const match = /^listening on (\S+)$/.exec(address);
    if (match === null) {
      throw new Error(`unexpected first line from threadline serve: ${JSON.stringify(address)}`);
    }
    return {
      baseUrl: `http://${match[1]}`,
      stop: () => stop(child),
      waitForLine: (what, find, timeoutMs) => waitForLine(logs, stderr, what, find, timeoutMs),
    };
  } catch (err) {
    await stop(child);
    throw new Error(`threadline serve did not start: ${String(err)}\n${logs.slice(-50).join("\n")}`);
  }
}

function waitForLine<T>(
  logs: readonly string[],
  stderr: Interface,
  what: string,
  find: (line: string) => T | undefined,
  timeoutMs: number,
): Promise<T> {
  for (const line of logs) {
    const found = find(line);
    if (found !== undefined) return Promise.resolve(found);
  }
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      stderr.off("line", onLine);
    };
    const onLine = (line: string) => {
      const found = find(line);
      if (found !== undefined) {
        done();
        resolve(found);
      }
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${what} in the server's stderr within ${timeoutMs} ms; its last lines:\n${logs.slice(-20).join("\n")}`));
    }, timeoutMs);
    stderr.on("line", onLine);
  });
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

/** The port of `server`'s `--http-port` (its `http_listening` log line), for a server started with one. */
export function httpPort(server: TestServer): Promise<number> {
  return server.waitForLine(
    "http_listening",
    (line) => (line.includes('"http_listening"') ? (JSON.parse(line) as { port: number }).port : undefined),
    30_000,
  );
}
