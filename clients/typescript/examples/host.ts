/**
 * An example host: a terminal chat that keeps one thread's state in a file.
 *
 *   npm run host -- "delete notes.txt"                      # asks you to approve or deny
 *   npm run host -- 'client:local_time {"zone": "Asia/Tokyo"}'  # runs this host's own tool
 *   npm run host -- --state other.json "hello"              # another thread
 *
 * Options: `--addr host:port` (default $THREADLINE_ADDR or 127.0.0.1:50051), `--token`
 * (default $THREADLINE_TOKEN), `--state FILE` (default thread.json), `--timeout SECONDS`.
 *
 * What a host does, in order: load the stored envelope (and the deferred batch it waits on, if
 * the last run suspended); stream a run from it; store the new envelope after every run; when the
 * run suspends, answer each pending call — ask the person at the terminal to approve or deny, or
 * execute the client tool the host declared itself — and resume, until the run ends. The server
 * keeps nothing between runs: the file is the thread.
 */

import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";

import {
  type Answer,
  type DeferredToolRequests,
  DeferredToolRequestsSchema,
  type HarnessState,
  type RunEvent,
  type RunInput,
  type RunResult,
  RunStatus,
  ThreadlineError,
  approve,
  callFailed,
  callResult,
  createThreadlineClient,
  decodeMessage,
  decodeState,
  deny,
  encodeMessage,
  encodeState,
  pendingCalls,
  resumeWith,
} from "../src/index.js";

/** The client tools this host declares in every run of the thread and executes itself. */
const CLIENT_TOOLS = [
  {
    name: "local_time",
    description: "The current local time in an IANA time zone, e.g. Europe/Paris.",
    parametersJsonSchema: JSON.stringify({
      type: "object",
      properties: { zone: { type: "string", description: "An IANA time zone name." } },
      required: ["zone"],
    }),
  },
];

/** Run one of this host's client tools; a thrown error becomes a failed result for the model. */
function executeClientTool(name: string, args: unknown): unknown {
  switch (name) {
    case "local_time": {
      const { zone } = args as { zone?: unknown };
      if (typeof zone !== "string") throw new Error("`zone` must be a string");
      return new Date().toLocaleTimeString("en-GB", { timeZone: zone, timeZoneName: "short" });
    }
    default:
      throw new Error(`this host has no tool named ${name}`);
  }
}

/** The stored thread: the envelope, and the batch it waits on when the last run suspended. */
interface StoredThread {
  state: HarnessState;
  pending?: DeferredToolRequests;
}

function load(path: string): StoredThread | undefined {
  if (!existsSync(path)) return undefined;
  const stored = JSON.parse(readFileSync(path, "utf8")) as { state: unknown; pending?: unknown };
  return {
    state: decodeState(JSON.stringify(stored.state)),
    ...(stored.pending === undefined ? {} : { pending: decodeMessage(DeferredToolRequestsSchema, JSON.stringify(stored.pending)) }),
  };
}

function save(path: string, thread: StoredThread): void {
  const stored = {
    state: JSON.parse(encodeState(thread.state, "json")) as unknown,
    ...(thread.pending === undefined ? {} : { pending: JSON.parse(encodeMessage(DeferredToolRequestsSchema, thread.pending, "json")) as unknown }),
  };
  // Write then rename, so a crash never leaves half a state behind.
  writeFileSync(`${path}.tmp`, `${JSON.stringify(stored, null, 2)}\n`);
  renameSync(`${path}.tmp`, path);
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    options: {
      addr: { type: "string", default: process.env["THREADLINE_ADDR"] ?? "127.0.0.1:50051" },
      token: { type: "string", default: process.env["THREADLINE_TOKEN"] ?? "" },
      state: { type: "string", default: "thread.json" },
      timeout: { type: "string", default: "600" },
    },
    allowPositionals: true,
  });
  const prompt = positionals.join(" ");
  const client = createThreadlineClient({ baseUrl: values.addr, token: values.token, runTimeoutMs: Number(values.timeout) * 1000 });
  const terminal = new Terminal();

  // Ctrl-C cancels the run in flight; the last stored state stays valid.
  const abort = new AbortController();
  process.once("SIGINT", () => abort.abort());

  try {
    let thread = load(values.state);
    console.log(thread ? `thread ${thread.state.threadId} (${values.state})` : `new thread (${values.state})`);
    if (!thread && prompt === "") throw new Error("give a prompt to start a thread");

    // A suspended thread is answered first; the prompt, if any, goes into the next run.
    let spec: RunInput = { clientTools: CLIENT_TOOLS };
    if (thread?.pending) {
      spec.previousState = thread.state;
      spec.deferredResume = resumeWith(thread.pending, await answer(thread.pending, terminal));
    } else {
      spec = { ...spec, prompt, ...(thread ? { previousState: thread.state } : {}) };
    }
    let queuedPrompt = thread?.pending && prompt !== "" ? prompt : undefined;

    for (;;) {
      const result = await stream(client.streamRun(spec, { signal: abort.signal }));
      if (result.state) {
        thread = { state: result.state, ...(result.deferred ? { pending: result.deferred } : {}) };
        save(values.state, thread);
      }
      if (result.status === RunStatus.SUSPENDED && result.deferred && result.state) {
        const answers = await answer(result.deferred, terminal);
        spec = { clientTools: CLIENT_TOOLS, previousState: result.state, deferredResume: resumeWith(result.deferred, answers) };
        continue;
      }
      report(result);
      if (queuedPrompt !== undefined && result.status === RunStatus.COMPLETED && result.state) {
        spec = { clientTools: CLIENT_TOOLS, previousState: result.state, prompt: queuedPrompt };
        queuedPrompt = undefined;
        continue;
      }
      break;
    }
  } finally {
    terminal.close();
    client.close();
  }
}

/**
 * Questions at the terminal. Lines are read through readline's async iterator, which buffers
 * them, so answers piped in (`echo y | npm run host -- ...`) are not lost; end of input = "".
 * stdin is opened only when a question is asked.
 */
class Terminal {
  private lines: AsyncIterator<string> | undefined;
  private close_: (() => void) | undefined;

  async ask(question: string): Promise<string> {
    if (this.lines === undefined) {
      const readline = createInterface({ input: process.stdin, terminal: process.stdin.isTTY });
      this.lines = readline[Symbol.asyncIterator]();
      this.close_ = () => readline.close();
    }
    process.stdout.write(question);
    const line = await this.lines.next();
    if (line.done) {
      process.stdout.write("\n");
      return "";
    }
    if (!process.stdin.isTTY) process.stdout.write(`${line.value}\n`);
    return line.value;
  }

  close(): void {
    this.close_?.();
  }
}

/** Print a run's text as it streams, and its tool activity; return its terminal result. */
async function stream(events: AsyncIterable<RunEvent>): Promise<RunResult> {
  let result: RunResult | undefined;
  for await (const { event } of events) {
    switch (event.case) {
      case "partStart":
        if (event.value.content) process.stdout.write(event.value.content);
        break;
      case "partDelta":
        if (event.value.contentDelta) process.stdout.write(event.value.contentDelta);
        break;
      case "partEnd":
        if (event.value.content) process.stdout.write("\n");
        break;
      case "toolCall":
        console.log(`  → ${event.value.toolName}(${event.value.argsJson})`);
        break;
      case "toolResult":
        console.log(`  ← ${event.value.toolName}: ${event.value.contentJson}`);
        break;
      case "result":
        result = event.value;
        break;
      default:
        // Lifecycle, native and future event cases: a host ignores what it does not need.
        break;
    }
  }
  if (!result) throw new Error("the stream ended without a result");
  return result;
}

/** Answer every pending call: approvals at the terminal, client tools by running them here. */
async function answer(batch: DeferredToolRequests, terminal: Terminal): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (const { call, args } of pendingCalls(batch)) {
    if (batch.approvals.includes(call)) {
      const reply = (await terminal.ask(`Allow ${call.toolName}(${call.argsJson})? [y/N, or a reason to deny] `)).trim();
      answers.push(/^y(es)?$/i.test(reply) ? approve(call, { answeredBy: "terminal" }) : deny(call, reply.toLowerCase() === "n" ? "" : reply, { answeredBy: "terminal" }));
    } else if (CLIENT_TOOLS.some((tool) => tool.name === call.toolName)) {
      try {
        const value = executeClientTool(call.toolName, args);
        console.log(`  ⚙ ${call.toolName}(${call.argsJson}) = ${JSON.stringify(value)}`);
        answers.push(callResult(call, value, { answeredBy: "example-host" }));
      } catch (err) {
        answers.push(callFailed(call, err instanceof Error ? err.message : String(err)));
      }
    } else {
      // An external tool of the agent's own, or a question: a person answers it.
      const reply = await terminal.ask(`${call.toolName}(${call.argsJson}) needs an answer: `);
      answers.push(callResult(call, reply));
    }
  }
  return answers;
}

function report(result: RunResult): void {
  switch (result.status) {
    case RunStatus.COMPLETED:
      console.log(`done: ${JSON.parse(result.outputJson) as unknown}`);
      break;
    case RunStatus.FAILED:
      console.log(`failed: ${result.failure?.code}: ${result.failure?.message}`);
      break;
    default:
      console.log(`ended: ${RunStatus[result.status]}`);
  }
}

main().catch((err: unknown) => {
  const error = ThreadlineError.from(err);
  console.error(error.reason ? `error ${error.reason}: ${error.rawMessage}` : `error: ${error.rawMessage}`);
  for (const [key, value] of Object.entries(error.metadata)) console.error(`  ${key}: ${value}`);
  process.exitCode = 1;
});
