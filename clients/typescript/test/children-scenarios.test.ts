// The shared scenario suite's child runs (CHILDREN §3-§6), against a real server (`THREADLINE_ADDR`,
// or `threadline serve --port 0` started here). The demo serves three agents: `default` with the
// inline child `helper` (`delegate <task>`, then `resume-child <execution id> <task>`; the helper
// answers `helper, task N: <task>`), `demo-lead` with the Host-managed child `reviewer`, run as
// agent `demo-reviewer` (`ask-child <task>`), and `demo-reviewer`, for which `delete <path>`
// asks for an approval.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { clone, create } from "@bufbuild/protobuf";

import {
  type CallResult,
  ChildAction,
  type ChildRequest,
  ChildRequestSchema,
  Code,
  DeferredKind,
  DeferredToolsMode,
  type HarnessState,
  type InlineDelegation,
  type RunEvent,
  type RunResult,
  RunResultSchema,
  RunStatus,
  SubagentMode,
  ThreadlineError,
  ToolCategory,
  ToolFailedResultSchema,
  approve,
  callResult,
  childAnswer,
  childRunning,
  collectRun,
  pendingChildren,
  resumeWith,
} from "../src/index.js";
import { isThreadlineError, output, stateOf } from "./checks.js";
import { client } from "./suite.js";

const THREAD_ID = /^thread_[0-9a-f]{32}$/;

function delegations(events: RunEvent[]): InlineDelegation[] {
  return events.flatMap((e) => (e.event.case === "inlineDelegation" ? [e.event.value] : []));
}

/** The child's answer the parent's model saw: the JSON the demo quotes after `<tool>: `. */
function quoted(result: RunResult, tool: string): Record<string, unknown> {
  const text = String(output(result));
  const prefix = `Tool results: ${tool}: `;
  assert.ok(text.startsWith(prefix), text);
  return JSON.parse(text.slice(prefix.length)) as Record<string, unknown>;
}

/** `demo-lead` asked to run its reviewer on `task`: the suspended parent and its one child request. */
async function askChild(task: string): Promise<{ parent: RunResult; child: ChildRequest }> {
  const parent = await client.run({ agent: "demo-lead", prompt: `ask-child ${task}` });
  assert.equal(parent.status, RunStatus.SUSPENDED);
  const children = pendingChildren(parent.deferred);
  assert.equal(children.length, 1);
  return { parent, child: children[0]!.child };
}

/** The reviewer run for `child`, suspended on its `delete_file` approval. */
async function suspendedChild(child: ChildRequest): Promise<RunResult> {
  const result = await client.runChild(child);
  assert.equal(result.status, RunStatus.SUSPENDED, `child ended ${RunStatus[result.status]}: ${result.failure?.message}`);
  assert.equal(result.threadId, child.threadId);
  assert.deepEqual(
    result.deferred?.approvals.map((a) => a.toolName),
    ["delete_file"],
  );
  return result;
}

/** Resume the suspended parent with `answer` to its child request: the parent's terminal result. */
function answerParent(parent: RunResult, answer: CallResult): Promise<RunResult> {
  return client.run({ agent: "demo-lead", previousState: stateOf(parent), deferredResume: resumeWith(parent.deferred!, [answer]) });
}

describe("inline children", () => {
  test("delegate runs the helper inside the parent's call; resume-child continues the same child", async () => {
    const { events, result } = await collectRun(client.streamRun({ prompt: "delegate tidy the notes" }));
    const [started, completed, ...rest] = delegations(events);
    assert.ok(started && completed);
    assert.deepEqual(rest, []);
    assert.equal(started.action, "started");
    assert.equal(started.status, "running");
    assert.equal(completed.action, "completed");
    assert.equal(completed.status, "completed");
    assert.match(started.invocationId, /^delegation-/);
    for (const field of ["invocationId", "childInstanceId", "childRunId", "parentRunId", "parentToolCallId"] as const) {
      assert.equal(completed[field], started[field], field);
    }
    assert.match(started.childRunId, /^run-[0-9a-f]{32}$/);
    assert.equal(started.parentRunId, result.runId);
    assert.equal(started.subagent, "helper");

    const answer = quoted(result, "delegate");
    assert.equal(answer["subagent"], "helper");
    assert.equal(answer["output"], "helper, task 1: tidy the notes");
    const executionId = String(answer["execution_id"]);
    assert.match(executionId, /^helper-[0-9a-f]{4}$/);
    assert.equal(started.childInstanceId, executionId);

    const resumed = await client.run({ prompt: `resume-child ${executionId} and the desk`, previousState: stateOf(result) });
    const again = quoted(resumed, "resume_subagent");
    assert.equal(again["execution_id"], executionId);
    assert.equal(again["output"], "helper, task 2: and the desk");
    const registry = stateOf(resumed).capabilityStates.find((c) => c.capabilityId === "a13n.subagents");
    assert.ok(registry, "the parent's state keeps its children");
    assert.equal(registry.version, "2");
    assert.ok(executionId in (JSON.parse(registry.dataJson) as { children: Record<string, unknown> }).children);
  });
});

describe("Host-managed children", () => {
  test("a child that suspends for an approval is answered, completes, and answers its parent", async () => {
    const { parent, child } = await askChild("delete old.txt");
    const [pending] = pendingChildren(parent.deferred);
    assert.equal(pending?.call.kind, DeferredKind.EXTERNAL);
    assert.equal(pending.call.targetIdentity, "tool/threadline.subagents.host/delegate");
    assert.equal(child.action, ChildAction.START);
    assert.equal(child.agent, "demo-reviewer");
    assert.equal(child.subagentName, "reviewer");
    assert.match(child.threadId, THREAD_ID);
    assert.equal(child.parent?.parentAgent, "demo-lead");
    assert.equal(child.parent.parentThreadId, parent.threadId);
    assert.equal(child.parent.parentRunId, parent.runId);
    assert.equal(child.parent.parentToolCallId, pending.call.toolCallId);
    assert.equal(child.parent.delegationId, child.threadId);
    assert.deepEqual(JSON.parse(child.input), { delegated_task: "delete old.txt", parent_task: "ask-child delete old.txt" });

    const suspended = await suspendedChild(child);
    assert.deepEqual(suspended.lineage, child.parent);
    assert.throws(() => childAnswer(child, suspended), /is suspended/);

    const { events, result: done } = await collectRun(
      client.streamChild(child, {
        previousState: stateOf(suspended),
        deferredResume: resumeWith(suspended.deferred!, [approve(suspended.deferred!.approvals[0]!)]),
      }),
    );
    const first = events[0]?.event;
    assert.equal(first?.case, "runStarted");
    assert.deepEqual(first.value.lineage, child.parent);
    assert.equal(done.threadId, child.threadId);
    assert.equal(output(done), "Tool results: delete_file: Deleted old.txt.");

    const finished = await answerParent(parent, childAnswer(child, done));
    assert.equal(finished.threadId, parent.threadId);
    assert.deepEqual(quoted(finished, "delegate"), {
      execution_id: child.threadId,
      subagent: "reviewer",
      status: "completed",
      output: "Tool results: delete_file: Deleted old.txt.",
    });
  });

  test("a child interrupted after its approval resume recovers from its checkpoint and runs the tool once", async () => {
    const { parent, child } = await askChild("delete notes.txt");
    const suspended = await suspendedChild(child);
    const accepted = resumeWith(suspended.deferred!, [approve(suspended.deferred!.approvals[0]!)]);

    // The crash: the host stops reading at the resume's first checkpoint, which cancels the run.
    let checkpoint: HarnessState | undefined;
    for await (const event of client.streamChild(child, { previousState: stateOf(suspended), deferredResume: accepted, checkpoints: true })) {
      if (event.event.case === "checkpointCandidate") {
        checkpoint = event.event.value.state;
        break;
      }
    }
    assert.ok(checkpoint, "the resume published a checkpoint");
    assert.equal(checkpoint.threadId, child.threadId);
    // The approved call ran before that checkpoint: its history incorporates the whole batch.
    assert.equal(await client.remainingDeferred(accepted, checkpoint), undefined);

    const { events, result: recovered } = await collectRun(
      client.streamChild(child, {
        previousState: checkpoint,
        deferredResume: resumeWith(accepted.requests!, [...accepted.results!.approvals], { recovery: true }),
      }),
    );
    assert.equal(output(recovered), "Tool results: delete_file: Deleted notes.txt.");
    assert.deepEqual(
      events.filter((e) => e.event.case === "toolCall"),
      [],
      "the recovery runs no tool again",
    );
    const history = JSON.parse(stateOf(recovered).messageHistory!.data) as { parts: { part_kind: string; tool_name?: string }[] }[];
    const returns = history.flatMap((m) => m.parts).filter((p) => p.part_kind === "tool-return");
    assert.deepEqual(
      returns.map((p) => p.tool_name),
      ["delete_file"],
    );

    const finished = await answerParent(parent, childAnswer(child, recovered));
    assert.equal(quoted(finished, "delegate")["output"], "Tool results: delete_file: Deleted notes.txt.");
  });

  test("recovering from the suspended state never reuses the approval as replay permission", async () => {
    const { parent, child } = await askChild("delete draft.txt");
    const suspended = await suspendedChild(child);
    const recovered = await client.runChild(child, {
      previousState: stateOf(suspended),
      deferredResume: resumeWith(suspended.deferred!, [approve(suspended.deferred!.approvals[0]!)], { recovery: true }),
    });
    const text = String(output(recovered));
    assert.match(text, /No tool result was recorded because execution was interrupted/);
    assert.doesNotMatch(text, /Deleted/);
    const finished = await answerParent(parent, childAnswer(child, recovered));
    assert.equal(quoted(finished, "delegate")["status"], "completed");
  });

  test("a failed child answers its parent with the failure", async () => {
    const { parent, child } = await askChild("delete old.txt");
    // A request limit of 0 fails the child's first model request.
    const failed = await client.runChild(child, { usageLimits: { requestLimit: 0n } });
    assert.equal(failed.status, RunStatus.FAILED, `child ended ${RunStatus[failed.status]}`);
    assert.equal(failed.failure?.code, "usage_limit_exceeded");
    const message = `Child ${child.threadId} did not complete successfully (usage_limit_exceeded).`;
    const answer = childAnswer(child, failed);
    assert.equal(answer.toolCallId, child.parent?.parentToolCallId);
    assert.deepEqual([answer.result.case, answer.result.value], ["failed", create(ToolFailedResultSchema, { message })]);
    const finished = await answerParent(parent, childAnswer(child, failed));
    assert.ok(String(output(finished)).includes(message), String(output(finished)));
  });

  test("a running answer lets the parent go on while the child works", async () => {
    const { parent, child } = await askChild("delete old.txt");
    const finished = await answerParent(parent, childRunning(child));
    assert.deepEqual(quoted(finished, "delegate"), { execution_id: child.threadId, subagent: "reviewer", status: "running" });
  });

  test("an answer that does not quote the request is CHILD_RESULT_INVALID", async () => {
    const { parent, child } = await askChild("delete old.txt");
    const wrong = callResult(child.parent!.parentToolCallId, { execution_id: "thread_other", subagent: "reviewer", status: "completed", output: "x" });
    await assert.rejects(answerParent(parent, wrong), isThreadlineError(Code.FailedPrecondition, "CHILD_RESULT_INVALID"));
  });

  test("a lineage naming a parent agent without that edge is CHILD_EDGE_UNKNOWN", async () => {
    const { child } = await askChild("delete old.txt");
    const elsewhere = clone(ChildRequestSchema, child);
    elsewhere.parent!.parentAgent = "default";
    await assert.rejects(client.runChild(elsewhere), isThreadlineError(Code.FailedPrecondition, "CHILD_EDGE_UNKNOWN"));
  });

  test("a malformed lineage is CHILD_LINEAGE_INVALID, naming the field", async () => {
    const { child } = await askChild("delete old.txt");
    const malformed = clone(ChildRequestSchema, child);
    malformed.parent!.parentRunId = "not-a-run";
    await assert.rejects(client.runChild(malformed), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.code, Code.InvalidArgument);
      assert.equal(err.reason, "CHILD_LINEAGE_INVALID");
      assert.match(err.metadata["field"] ?? "", /parent_run_id/);
      return true;
    });
  });

  test("deferred_tools UNSUPPORTED leaves the delegate tool off: the parent completes with text", async () => {
    const result = await client.run({ agent: "demo-lead", prompt: "ask-child x", deferredTools: DeferredToolsMode.UNSUPPORTED });
    assert.equal(result.status, RunStatus.COMPLETED);
    assert.equal(result.deferred, undefined);
    // The demo's model still calls it, and learns the tool is not there.
    const { error } = quoted(result, "delegate") as { error: string };
    assert.match(error, /^Unknown tool name: 'delegate'\. Available tools: /);
    assert.doesNotMatch(error.slice(error.indexOf("Available")), /delegate|resume_subagent/);
  });
});

describe("server info", () => {
  test("GetServerInfo lists each agent's children and their delegation tools", async () => {
    const info = await client.getServerInfo();
    const agent = (name: string) => {
      const found = info.agents.find((a) => a.name === name);
      assert.ok(found, name);
      return found;
    };
    const inline = agent("default");
    assert.deepEqual(
      inline.subagents.map((s) => [s.name, s.mode]),
      [["helper", SubagentMode.INLINE]],
    );
    const lead = agent("demo-lead");
    assert.deepEqual(
      lead.subagents.map((s) => [s.name, s.mode, s.agent]),
      [["reviewer", SubagentMode.HOST, "demo-reviewer"]],
    );
    assert.ok(agent("demo-reviewer"));
    for (const [found, category] of [
      [inline, ToolCategory.PLAIN],
      [lead, ToolCategory.EXTERNAL],
    ] as const) {
      for (const name of ["delegate", "resume_subagent"]) {
        assert.equal(found.tools.find((t) => t.name === name)?.category, category, `${found.name}: ${name}`);
      }
    }
  });

  test("a client tool named delegate is CLIENT_TOOL_INVALID", async () => {
    const clientTools = [{ name: "delegate", parametersJsonSchema: '{"type":"object"}' }];
    await assert.rejects(client.run({ prompt: "hi", clientTools }), isThreadlineError(Code.InvalidArgument, "CLIENT_TOOL_INVALID"));
  });
});

describe("child helpers", () => {
  const request = create(ChildRequestSchema, {
    action: ChildAction.CONTINUE,
    subagentName: "reviewer",
    agent: "demo-reviewer",
    threadId: "thread_0123456789abcdef0123456789abcdef",
    parent: { parentToolCallId: "p1" },
  });
  const result = (status: RunStatus, extra: Parameters<typeof create<typeof RunResultSchema>>[1] = {}) =>
    create(RunResultSchema, { status, threadId: request.threadId, ...extra });

  test("childAnswer: a completed child's value, a failed or cancelled one's failure", () => {
    const done = childAnswer(request, result(RunStatus.COMPLETED, { outputJson: '{"ok":true}' }), { answeredBy: "host" });
    assert.equal(done.toolCallId, "p1");
    assert.equal(done.answeredBy, "host");
    assert.equal(done.result.case, "valueJson");
    assert.deepEqual(JSON.parse(done.result.value), {
      execution_id: request.threadId,
      subagent: "reviewer",
      status: "completed",
      output: { ok: true },
    });
    const failed = childAnswer(request, result(RunStatus.FAILED, { failure: { code: "usage_limit_exceeded" } }));
    assert.equal(failed.result.case, "failed");
    assert.equal(failed.result.value.message, `Child ${request.threadId} did not complete successfully (usage_limit_exceeded).`);
    const cancelled = childAnswer(request, result(RunStatus.CANCELLED));
    assert.equal(cancelled.result.case, "failed");
    assert.equal(cancelled.result.value.message, `Child ${request.threadId} did not complete successfully (child_cancelled).`);
  });

  test("childAnswer refuses a suspended child and another thread's result", () => {
    assert.throws(() => childAnswer(request, result(RunStatus.SUSPENDED)), RangeError);
    assert.throws(() => childAnswer(request, create(RunResultSchema, { status: RunStatus.COMPLETED, threadId: "thread_x" })), RangeError);
  });

  test("runChild refuses to continue a child without its saved state, before any call", async () => {
    await assert.rejects(client.runChild(request), /needs its saved state/);
  });
});
