// Shell environments against a real server with a mount: `threadline serve --mount
// work=local:<fresh temp dir>` (and --allow-root-shell as root, as in CI), started here. The demo
// agent's shell words (server/demo.py): `shell <command>` runs it to the end, `shell-bg <command>`
// leaves it running after the 5 s initial wait, `shell-wait [out [err]]` discovers the thread's
// newest command, waits up to 10 s for it to finish and reads it from those offsets. The answer
// quotes the last tool result: `Tool results: <tool>: <result JSON>`. A configuration file's
// `[mounts.NAME]` tables (`--config`) give a mount to some agents only, with fewer actions or an env.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import {
  Code,
  EnvironmentStateSchema,
  type HarnessState,
  type RunResult,
  RunStatus,
  type ThreadlineClient,
  ThreadlineError,
  ToolCategory,
  type ToolInfo,
  createThreadlineClient,
} from "../src/index.js";
import { stateOf } from "./checks.js";
import { SERVER_ADDR, type TestServer, startServer } from "./server.js";

const ALL_ACTIONS = [
  "environment.shell.exec",
  "environment.process.list",
  "environment.process.inspect",
  "environment.process.read_output",
  "environment.process.wait",
  "environment.process.write_stdin",
  "environment.process.close_stdin",
  "environment.process.signal",
  "environment.process.kill",
];
const SHELL_TOOLS = ["shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal"];
const REFERENCE = /^proc-([0-9a-f]{8})-[1-9][0-9]{0,5}$/;
const HEX32 = /^[0-9a-f]{32}$/;
const WAITS_FOR_GO = "sh -c 'echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished'";
/** How long a test polls for a command's end (a bound for a broken server, not a measure). */
const POLL_BOUND_MS = 30_000;
/** Root needs the explicit opt-in; CI runs as root. */
const ROOT_SHELL = process.getuid?.() === 0 ? ["--allow-root-shell"] : [];
const NO_SHELL = "This server has no shell: start it with --mount NAME=local:ROOT.";

interface Page {
  text: string;
  start_offset: number;
  next_offset: number;
  observation_closed: boolean;
}

/** The part of a shell tool result the tests read. */
interface ToolResult {
  ok: boolean;
  process_id?: string;
  status: { phase: string; exit_code: number | null };
  stdout: Page;
  processes?: unknown[];
  missing?: unknown[];
  has_more?: boolean;
}

/** A server with the mount "work" at a fresh directory. */
interface Mounted {
  server: TestServer;
  root: string;
  client: ThreadlineClient;
  close(): Promise<void>;
}

async function mountedServer(): Promise<Mounted> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "threadline-mount-")));
  const server = await startServer(["--mount", `work=local:${root}`, ...ROOT_SHELL]);
  const client = createThreadlineClient({ baseUrl: server.baseUrl, timeoutMs: 30_000, runTimeoutMs: 60_000 });
  return {
    server,
    root,
    client,
    async close() {
      client.close();
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The result of `tool` that a COMPLETED run's answer quotes. */
function quoted(result: RunResult, tool: string): ToolResult {
  assert.equal(result.status, RunStatus.COMPLETED, `run ended ${RunStatus[result.status]}: ${result.failure?.message}`);
  const text = JSON.parse(result.outputJson) as string;
  const prefix = `Tool results: ${tool}: `;
  assert.ok(text.startsWith(prefix), text);
  const body = JSON.parse(text.slice(prefix.length)) as ToolResult;
  assert.equal(body.ok, true, text);
  return body;
}

/** The "work" entry of a state, checked for shape, with its `state_json` decoded. */
function workEntry(state: HarnessState): { backend: string; scope: string; commands: { id: string; started_at: string }[] } {
  const entries = state.environmentStates.filter((e) => e.mountName === "work");
  assert.equal(entries.length, 1, "one work entry");
  const [entry] = entries;
  assert.equal(entry!.providerKey, "threadline_local");
  assert.equal(entry!.stateVersion, "1");
  const value = JSON.parse(entry!.stateJson) as { backend: string; scope: string; commands: { id: string; started_at: string }[] };
  assert.deepEqual(Object.keys(value).sort(), ["backend", "commands", "scope"]);
  assert.match(value.backend, HEX32);
  assert.match(value.scope, HEX32);
  return value;
}

function shellWait(client: ThreadlineClient, state: HarnessState, ...offsets: number[]): Promise<RunResult> {
  return client.run({ prompt: ["shell-wait", ...offsets].join(" "), previousState: state });
}

/** Run 1 of a new thread: `shell-bg command`, still running when the run ends. */
async function startInBackground(client: ThreadlineClient, command: string): Promise<[RunResult, ToolResult]> {
  const result = await client.run({ prompt: `shell-bg ${command}` });
  const started = quoted(result, "shell_exec");
  assert.match(started.process_id ?? "", REFERENCE);
  assert.equal(started.status.phase, "running");
  return [result, started];
}

/** Whether `pid` no longer runs (gone, or a zombie nobody has reaped yet). */
function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return true;
    throw err;
  }
  if (!existsSync("/proc/self")) return false; // no /proc to tell a zombie apart: it still exists
  try {
    // "<pid> (<comm>) <state> ...": a zombie has exited; only its reaping is left.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/)[0] === "Z";
  } catch {
    return true; // gone between the two looks
  }
}

const skip = SERVER_ADDR ? "THREADLINE_ADDR is set: these tests start a server of their own" : false;

describe("shell environments", { skip }, () => {
  let mounted: Mounted;

  before(async () => {
    mounted = await mountedServer();
  });

  after(async () => {
    await mounted?.close();
  });

  test("GetServerInfo lists the mount, its provider and the shell tools", async () => {
    const info = await mounted.client.getServerInfo();
    const agent = info.agents.find((a) => a.name === "default");
    assert.ok(agent);
    assert.equal(agent.mounts.length, 1);
    const [mount] = agent.mounts;
    assert.equal(mount!.name, "work");
    assert.equal(mount!.providerKey, "threadline_local");
    assert.equal(mount!.processCapable, true);
    assert.deepEqual(mount!.actions, ALL_ACTIONS);
    assert.deepEqual(
      info.environmentProviders.map((p) => [p.providerKey, p.stateVersions]),
      [["threadline_local", ["1"]]],
    );
    for (const name of SHELL_TOOLS) {
      const tool: ToolInfo | undefined = agent.tools.find((t) => t.name === name);
      assert.ok(tool, name);
      const retryable = name === "shell_info" || name === "shell_wait";
      assert.equal(tool.category, retryable ? ToolCategory.RECOVERY_RETRYABLE : ToolCategory.PLAIN, name);
      assert.equal(tool.recoveryRetryable, retryable, name);
    }
  });

  test("a short command completes in its call", async () => {
    const result = await mounted.client.run({ prompt: "shell printf hello" });
    const done = quoted(result, "shell_exec");
    assert.equal(done.process_id, undefined, "finished within the initial wait: no reference");
    assert.deepEqual(done.status.phase, "exited");
    assert.equal(done.status.exit_code, 0);
    assert.equal(done.stdout.text, "hello");
    assert.equal(done.stdout.next_offset, 5);
    assert.equal(done.stdout.observation_closed, true);
    // A final-at-once result retains nothing, so the mount has no scope to export (ENVIRONMENT §9.2).
    assert.deepEqual(stateOf(result).environmentStates, []);
  });

  test("a background command is found by a later run and read by offset, and not by a fork", async () => {
    const { client, root } = mounted;
    const [first, started] = await startInBackground(client, WAITS_FOR_GO);
    assert.equal(started.stdout.text, "started\n");
    const entry = workEntry(stateOf(first));
    assert.equal(entry.commands.length, 1);

    // Run 2 discovers the command under a reference of its own (after the demo's 10 s wait: the
    // command waits for go) and reads it from offset 0.
    const second = await shellWait(client, stateOf(first));
    const seen = quoted(second, "shell_wait");
    const tag1 = REFERENCE.exec(started.process_id!)?.[1];
    const tag2 = REFERENCE.exec(seen.process_id ?? "")?.[1];
    assert.ok(tag2 !== undefined && tag2 !== tag1, `run 2 reference ${seen.process_id}, run 1 ${started.process_id}`);
    assert.equal(seen.status.phase, "running");
    assert.deepEqual([seen.stdout.text, seen.stdout.start_offset, seen.stdout.next_offset], ["started\n", 0, 8]);
    assert.deepEqual(workEntry(stateOf(second)), entry);

    writeFileSync(join(root, "go"), "");
    let state = stateOf(second);
    let finished: ToolResult | undefined;
    const deadline = Date.now() + POLL_BOUND_MS;
    while (finished === undefined) {
      const later = await shellWait(client, state, seen.stdout.next_offset);
      const page = quoted(later, "shell_wait");
      state = stateOf(later);
      assert.equal(page.stdout.start_offset, 8);
      if (page.status.phase !== "running" && page.stdout.observation_closed) {
        finished = page;
      } else {
        assert.ok(["", "finished\n"].includes(page.stdout.text), page.stdout.text);
        assert.ok(Date.now() < deadline, `the command did not finish within ${POLL_BOUND_MS} ms`);
        await sleep(100);
      }
    }
    assert.equal(finished.status.phase, "exited");
    assert.equal(finished.status.exit_code, 0);
    assert.deepEqual([finished.stdout.text, finished.stdout.next_offset], ["finished\n", 17]);
    assert.equal(workEntry(state).scope, entry.scope);

    // Reads never consume: the same offsets give the same bytes again.
    const again = quoted(await shellWait(client, state, 8), "shell_wait");
    assert.deepEqual([again.stdout.text, again.stdout.next_offset], ["finished\n", 17]);
    const whole = quoted(await shellWait(client, state), "shell_wait");
    assert.deepEqual([whole.stdout.text, whole.stdout.next_offset], ["started\nfinished\n", 17]);

    // A fork starts with no environment state, so it reaches none of its parent's commands.
    const fork = await client.forkState(state);
    assert.notEqual(fork.threadId, first.threadId);
    assert.deepEqual(fork.environmentStates, []);
    const onFork = await shellWait(client, fork);
    const found = quoted(onFork, "shell_info");
    assert.deepEqual([found.processes, found.has_more, found.missing], [[], false, undefined]);
    assert.deepEqual(stateOf(onFork).environmentStates, []);
  });

  for (const [name, stateJson, version, code, reason] of [
    ["invalid", '{"backend": "nope"}', "1", Code.InvalidArgument, "ENVIRONMENT_STATE_INVALID"],
    ["unsupported", "{}", "9", Code.FailedPrecondition, "ENVIRONMENT_STATE_VERSION_UNSUPPORTED"],
  ] as const) {
    test(`a broken local entry (${name}) is refused before the run with ${reason}`, async () => {
      const state = await mounted.client.newState();
      state.environmentStates = [
        create(EnvironmentStateSchema, { mountName: "work", providerKey: "threadline_local", stateVersion: version, stateJson }),
      ];
      await assert.rejects(mounted.client.run({ prompt: "shell printf hello", previousState: state }), (err: unknown) => {
        assert.ok(err instanceof ThreadlineError);
        assert.equal(err.code, code);
        assert.equal(err.reason, reason);
        assert.equal(err.metadata["mount"], "work");
        if (version === "9") {
          assert.deepEqual([err.metadata["received"], err.metadata["supported"]], ["9", "1"]);
        }
        return true;
      });
    });
  }
});

describe("shell environments at server shutdown", { skip }, () => {
  test("stopping the server (SIGTERM) kills what it still ran", async () => {
    const mounted = await mountedServer();
    try {
      await startInBackground(mounted.client, "echo $$ > pid; sleep 300");
      const pid = Number(readFileSync(join(mounted.root, "pid"), "utf8").trim());
      assert.ok(Number.isInteger(pid) && pid > 0, `pid ${pid}`);
      assert.equal(processGone(pid), false, "the command runs before the server stops");
      mounted.client.close();
      await mounted.server.stop();

      const deadline = Date.now() + POLL_BOUND_MS;
      while (!processGone(pid)) {
        assert.ok(Date.now() < deadline, `pid ${pid} still runs ${POLL_BOUND_MS} ms after the server stopped`);
        await sleep(50);
      }
    } finally {
      await mounted.close();
    }
  });
});

describe("shell environments from a configuration file", { skip }, () => {
  test("mounts from a configuration file reach only their agents, with their actions and env", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "threadline-config-")));
    mkdirSync(join(dir, "work"));
    mkdirSync(join(dir, "quick"));
    const config = join(dir, "threadline.toml");
    // Relative roots are relative to the file.
    writeFileSync(
      config,
      [
        "[mounts.work]",
        'root = "work"',
        'agents = ["default"]',
        'env = { GREETING = "hello from the file" }',
        "",
        "[mounts.quick]",
        'root = "quick"',
        'agents = ["demo-lead"]',
        'actions = ["environment.shell.exec"]',
        "",
      ].join("\n"),
    );
    const server = await startServer(["--config", config, ...ROOT_SHELL]);
    const client = createThreadlineClient({ baseUrl: server.baseUrl, timeoutMs: 30_000, runTimeoutMs: 60_000 });
    try {
      const info = await client.getServerInfo();
      const agents = new Map(info.agents.map((a) => [a.name, a]));
      const mountsOf = (name: string) =>
        agents.get(name)!.mounts.map((m) => [m.name, m.providerKey, m.actions, m.processCapable]);
      const shellToolsOf = (name: string) =>
        agents.get(name)!.tools.map((t) => t.name).filter((t) => SHELL_TOOLS.includes(t)).sort();
      for (const name of ["default", "demo-lead", "demo-reviewer"]) assert.ok(agents.has(name), name);
      assert.deepEqual(mountsOf("default"), [["work", "threadline_local", ALL_ACTIONS, true]]);
      assert.deepEqual(mountsOf("demo-lead"), [["quick", "threadline_local", ["environment.shell.exec"], false]]);
      assert.deepEqual(mountsOf("demo-reviewer"), []);
      assert.deepEqual(shellToolsOf("default"), [...SHELL_TOOLS].sort());
      assert.deepEqual(shellToolsOf("demo-lead"), ["shell_exec"]);
      assert.deepEqual(shellToolsOf("demo-reviewer"), []);

      // The mount's env reaches the command.
      const greeted = quoted(await client.run({ agent: "default", prompt: 'shell printf "$GREETING"' }), "shell_exec");
      assert.deepEqual([greeted.status.phase, greeted.status.exit_code], ["exited", 0]);
      assert.equal(greeted.stdout.text, "hello from the file");

      // An agent without a mount has no shell tools, so the demo agent answers in text.
      const refused = await client.run({ agent: "demo-reviewer", prompt: "shell printf x" });
      assert.equal(refused.status, RunStatus.COMPLETED, refused.failure?.message);
      assert.equal(JSON.parse(refused.outputJson), NO_SHELL);
    } finally {
      client.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
