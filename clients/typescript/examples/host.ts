/**
 * An example host: a terminal chat on one thread, kept in a file or by the server.
 *
 *   npm run host -- "delete notes.txt"                      # asks you to approve or deny
 *   npm run host -- 'client:local_time {"zone": "Asia/Tokyo"}'  # runs this host's own tool
 *   npm run host -- --state other.json "hello"              # another thread
 *   npm run host -- --state lead.json --agent demo-lead "ask-child delete old.txt"  # a child run here
 *
 *   npm run host -- --thread thread_mine "delete notes.txt" # the server keeps the thread
 *   npm run host -- --thread thread_mine "count"            # same thread, by its ID only
 *   npm run host -- --thread thread_mine --join run-…       # print a run's events (live or finished)
 *   npm run host -- --thread thread_mine --watch            # print the thread's changes until Ctrl-C
 *   npm run host -- --thread thread_mine --start "sleep 3"  # a background run: its run ID, events, result
 *
 * Options: `--addr host:port` (default $THREADLINE_ADDR or 127.0.0.1:50051), `--token`
 * (default $THREADLINE_TOKEN), `--state FILE` (default thread.json), `--thread ID` (instead of
 * `--state`), `--agent NAME` (default: the server's), `--timeout SECONDS`; with `--thread`,
 * `--join RUN` (a run ID, or `latest`: the running one, else the last) or `--watch` instead of a
 * prompt, and `--start` with one.
 *
 * With `--state` (HarnessService) the host owns the thread. What it does, in order: load the
 * stored envelope (and the deferred batch it waits on, if the last run suspended); stream a run
 * from it; store the new envelope after every run; when the run suspends, answer each pending
 * call — ask the person at the terminal to approve or deny, or execute the client tool the host
 * declared itself — and resume, until the run ends. The server keeps nothing between runs: the
 * file is the thread. A pending call that asks for a Host-managed child (`call.child`) is run
 * here, as a thread of its own whose pending calls are answered the same way, and its outcome
 * answers the parent's call.
 *
 * With `--thread` (ThreadService, `client.threads`) the host keeps nothing: the server stores the
 * thread under that ID (created on first use) with every turn and its pending batch, so a later
 * session, from anywhere, answers what is pending by running the host again without a prompt. The
 * answers are the same; they go back by call ID, without the batch. Ctrl-C stops this host, not
 * the run: a thread run outlives its call and commits on the server. `--join` follows one of its
 * runs from another terminal or machine, every event with its sequence (the SDK reconnects a
 * broken stream from the last one), and `--watch` prints each change of the thread. `--start`
 * starts the turn in the background (`threads.startRun`): the server runs it with no client, so
 * Ctrl-C leaves it running; the host prints its run ID, then its events by joining it, and its
 * result. Answer what it leaves pending with `--thread` again.
 */

import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";

import {
  type Answer,
  type DeferredToolRequests,
  type Thread,
  type ThreadRunInput,
  type ThreadRunOutcome,
  ThreadChange,
  ThreadNotFound,
  ThreadRunStatus,
  ThreadStatus,
  type ThreadlineClient,
  answers,
  DeferredToolRequestsSchema,
  type HarnessState,
  type RunEvent,
  type RunInput,
  type RunResult,
  RunStatus,
  ThreadlineError,
  type ChildRequest,
  approve,
  callFailed,
  callResult,
  childAnswer,
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
      state: { type: "string" },
      thread: { type: "string" },
      agent: { type: "string" },
      timeout: { type: "string", default: "600" },
      join: { type: "string" },
      watch: { type: "boolean", default: false },
      start: { type: "boolean", default: false },
    },
    allowPositionals: true,
  });
  const prompt = positionals.join(" ");
  if (values.state !== undefined && values.thread !== undefined) throw new Error("give --state or --thread, not both");
  const statePath = values.state ?? "thread.json";
  const client = createThreadlineClient({ baseUrl: values.addr, token: values.token, runTimeoutMs: Number(values.timeout) * 1000 });
  const terminal = new Terminal();
  const agent = values.agent === undefined ? {} : { agent: values.agent };

  // Ctrl-C cancels the run in flight; the last stored state stays valid.
  const abort = new AbortController();
  process.once("SIGINT", () => abort.abort());

  try {
    if (values.join !== undefined || values.watch) {
      if (values.thread === undefined || prompt !== "" || (values.join !== undefined && values.watch) || values.start) {
        throw new Error("--join RUN and --watch take --thread ID and no prompt, one of them (not --start)");
      }
      process.exitCode = values.watch
        ? await watch(client, values.thread, abort.signal)
        : await join(client, values.thread, values.join ?? "", abort.signal);
      return;
    }
    if (values.start) {
      if (values.thread === undefined || prompt === "") throw new Error("--start takes --thread ID and a prompt");
      process.exitCode = await start(client, values.thread, prompt, abort.signal, agent);
      return;
    }
    if (values.thread !== undefined) {
      process.exitCode = await threadSession(client, values.thread, prompt, terminal, abort.signal, agent);
      return;
    }
    let thread = load(statePath);
    console.log(thread ? `thread ${thread.state.threadId} (${statePath})` : `new thread (${statePath})`);
    if (!thread && prompt === "") throw new Error("give a prompt to start a thread");

    // Every run of the thread: its agent and this host's tools. A suspended thread is answered
    // first; the prompt, if any, goes into the next run.
    const base: RunInput = { ...agent, clientTools: CLIENT_TOOLS };
    let spec: RunInput = { ...base };
    if (thread?.pending) {
      spec.previousState = thread.state;
      spec.deferredResume = resumeWith(thread.pending, await answer(client, thread.pending, terminal));
    } else {
      spec = { ...spec, prompt, ...(thread ? { previousState: thread.state } : {}) };
    }
    let queuedPrompt = thread?.pending && prompt !== "" ? prompt : undefined;

    for (;;) {
      const result = await stream(client.streamRun(spec, { signal: abort.signal }));
      if (result.state) {
        thread = { state: result.state, ...(result.deferred ? { pending: result.deferred } : {}) };
        save(statePath, thread);
      }
      if (result.status === RunStatus.SUSPENDED && result.deferred && result.state) {
        const answers = await answer(client, result.deferred, terminal);
        spec = { ...base, previousState: result.state, deferredResume: resumeWith(result.deferred, answers) };
        continue;
      }
      report(result);
      if (queuedPrompt !== undefined && result.status === RunStatus.COMPLETED && result.state) {
        spec = { ...base, previousState: result.state, prompt: queuedPrompt };
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
 * `--thread`: reuse the thread with this ID, or create it; answer what it waits on, then run the
 * prompt. Returns the exit status.
 */
async function threadSession(
  client: ThreadlineClient,
  threadId: string,
  prompt: string,
  terminal: Terminal,
  signal: AbortSignal,
  agent: { agent?: string },
): Promise<number> {
  const thread = await openThread(client, threadId, agent);
  if (thread.pending === undefined && prompt === "") {
    console.error("give a prompt (nothing is pending to resume)");
    return 2;
  }

  let outcome: ThreadRunOutcome | undefined;
  if (thread.pending !== undefined) {
    // A batch left by an earlier session (or another host): answer it first.
    console.log(`${pendingCalls(thread.pending).length} deferred call(s) wait for an answer`);
    const replies = await answer(client, thread.pending, terminal);
    outcome = await driveThread(client, threadId, { answers: answers(...replies) }, terminal, signal);
  }
  if (prompt !== "") {
    outcome = await driveThread(client, threadId, { text: prompt }, terminal, signal);
  }
  report(outcome!.result);
  console.log(`thread ${threadId} is now at revision ${outcome!.revision}`);
  return outcome!.result.status === RunStatus.COMPLETED ? 0 : 1;
}

/** The thread with this ID, created (with `agent`) if there is none yet. */
async function openThread(client: ThreadlineClient, threadId: string, agent: { agent?: string }): Promise<Thread> {
  try {
    const thread = await client.threads.get(threadId);
    console.log(`thread ${thread.threadId} is at revision ${thread.revision}, ${ThreadStatus[thread.status]}`);
    return thread;
  } catch (err) {
    if (!(err instanceof ThreadNotFound)) throw err;
    const thread = await client.threads.create({ threadId, ...agent });
    console.log(`created thread ${thread.threadId}`);
    return thread;
  }
}

/**
 * Run the thread's next turn, then answer for as long as it suspends. Nothing is saved here: the
 * server commits every turn and keeps the pending batch, should the answer never come.
 */
async function driveThread(
  client: ThreadlineClient,
  threadId: string,
  input: ThreadRunInput,
  terminal: Terminal,
  signal: AbortSignal,
): Promise<ThreadRunOutcome> {
  for (;;) {
    const events = client.threads.stream(threadId, { ...input, clientTools: CLIENT_TOOLS, signal });
    const result = await stream(events);
    if (result.status !== RunStatus.SUSPENDED || result.deferred === undefined) {
      return events.outcome!;
    }
    input = { answers: answers(...(await answer(client, result.deferred, terminal))) };
  }
}

/** `--join`: print every event of one run of the thread, as it is written, then how it ended. */
async function join(client: ThreadlineClient, threadId: string, runId: string, signal: AbortSignal): Promise<number> {
  const events = client.threads.joinRun(threadId, { runId: runId === "latest" ? "" : runId, signal });
  await printEvents(events);
  const outcome = events.outcome!;
  console.log(`(run ${events.runId}: revision ${outcome.revision})`);
  report(outcome.result);
  return outcome.result.status === RunStatus.COMPLETED ? 0 : 1;
}

/**
 * `--start`: start the turn in the background, print its run ID, then its events as a join gets
 * them (its next attempts too, should its server be lost), then its result. Ctrl-C stops this host
 * only: the server goes on with the run.
 */
async function start(client: ThreadlineClient, threadId: string, prompt: string, signal: AbortSignal, agent: { agent?: string }): Promise<number> {
  await openThread(client, threadId, agent);
  const started = await client.threads.startRun(threadId, { text: prompt, clientTools: CLIENT_TOOLS, signal });
  console.log(`started ${started.runId} (request ${started.requestId}) from revision ${started.revision}: ${ThreadRunStatus[started.status]}`);
  await printEvents(started.events({ signal }));
  const { result, revision } = await started.result({ signal });
  console.log(`(request ${started.requestId}: revision ${revision})`);
  report(result);
  if (result.status === RunStatus.SUSPENDED) console.log(`answer it with: npm run host -- --thread ${threadId}`);
  return result.status === RunStatus.COMPLETED ? 0 : 1;
}

/** Print each event of a join with its sequence, as it is written. */
async function printEvents(events: AsyncIterable<RunEvent>): Promise<void> {
  for await (const event of events) {
    console.log(`${String(event.sequence).padStart(4)} ${event.event.case ?? "?"}${detail(event)}`);
  }
}

/** What `--join` and `--start` print after an event's case. */
function detail({ runId, sequence, event }: RunEvent): string {
  switch (event.case) {
    case "runStarted":
      return ` ${runId}`;
    case "toolCall":
      return ` ${event.value.toolName}(${event.value.argsJson})`;
    case "toolResult":
      return ` ${event.value.toolName}: ${event.value.contentJson}`;
    case "threadCommitted":
      return ` revision ${event.value.revision}`;
    case "eventsOmitted":
      return ` ${event.value.firstSequence}..${sequence}`;
    case "result":
      return ` ${RunStatus[event.value.status]}`;
    default:
      return "";
  }
}

/** `--watch`: print the thread's snapshot, then each change, until Ctrl-C or its deletion. */
async function watch(client: ThreadlineClient, threadId: string, signal: AbortSignal): Promise<number> {
  try {
    for await (const { thread, changeSequence, changes } of client.threads.watchThread(threadId, { signal })) {
      const kinds = changes.map((change) => ThreadChange[change]).join(",");
      const lease = thread?.lease === undefined ? "" : `, run ${thread.lease.runId}`;
      console.log(`${changeSequence} ${kinds}: ${ThreadStatus[thread?.status ?? ThreadStatus.UNSPECIFIED]} at revision ${thread?.revision ?? 0n}${lease}`);
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
  return 0;
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

/**
 * Answer every pending call: approvals at the terminal, client tools and child requests by running
 * them here.
 */
async function answer(client: ThreadlineClient, batch: DeferredToolRequests, terminal: Terminal): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (const { call, args } of pendingCalls(batch)) {
    if (batch.approvals.includes(call)) {
      const reply = (await terminal.ask(`Allow ${call.toolName}(${call.argsJson})? [y/N, or a reason to deny] `)).trim();
      answers.push(/^y(es)?$/i.test(reply) ? approve(call, { answeredBy: "terminal" }) : deny(call, reply.toLowerCase() === "n" ? "" : reply, { answeredBy: "terminal" }));
    } else if (call.child !== undefined) {
      answers.push(await runChild(client, call.child, terminal));
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

/**
 * Run a Host-managed child to its end, answering its own pending calls like the parent's, and
 * return the parent's answer. A real host stores each child result under `child.threadId` (as
 * this one stores the parent's) so an interrupted child is continued, never started twice; this
 * demo keeps the child in memory only.
 */
async function runChild(client: ThreadlineClient, child: ChildRequest, terminal: Terminal): Promise<Answer> {
  console.log(`  ⇢ child ${child.subagentName} (agent ${child.agent}, ${child.threadId})`);
  let result = await stream(client.streamChild(child, { clientTools: CLIENT_TOOLS }));
  while (result.status === RunStatus.SUSPENDED && result.deferred && result.state) {
    const deferredResume = resumeWith(result.deferred, await answer(client, result.deferred, terminal));
    result = await stream(client.streamChild(child, { clientTools: CLIENT_TOOLS, previousState: result.state, deferredResume }));
  }
  console.log(`  ⇠ child ${child.threadId} ${RunStatus[result.status]}`);
  return childAnswer(child, result);
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
