// Assertions the suites share.

import assert from "node:assert/strict";

import { Code, type HarnessState, ProtocolError, type RunResult, RunStatus, ThreadlineError } from "../src/index.js";

/**
 * A check for `assert.throws` / `assert.rejects`: a `ProtocolError` with the whole model (a
 * `ThreadlineError`, `Code.Internal`, no reason or details) whose message is exactly `message`.
 */
export function isProtocolError(message: string | RegExp): (err: unknown) => true {
  return (err: unknown) => {
    assert.ok(err instanceof ProtocolError, `not a ProtocolError: ${String(err)}`);
    assert.ok(err instanceof ThreadlineError);
    assert.equal(err.name, "ProtocolError");
    assert.equal(err.code, Code.Internal);
    assert.equal(err.reason, "");
    assert.equal(err.domain, "");
    assert.deepEqual(err.metadata, {});
    assert.deepEqual(err.fieldViolations, []);
    if (typeof message === "string") {
      assert.equal(err.rawMessage, message);
    } else {
      assert.match(err.rawMessage, message);
    }
    assert.equal(err.message, `[internal] ${err.rawMessage}`);
    return true;
  };
}

/**
 * A check for `assert.rejects`: a `ThreadlineError` with `code` and, when given, `reason`.
 */
export function isThreadlineError(code: Code, reason?: string): (err: unknown) => true {
  return (err: unknown) => {
    assert.ok(err instanceof ThreadlineError);
    assert.equal(err.code, code);
    if (reason !== undefined) {
      assert.equal(err.reason, reason);
    }
    return true;
  };
}

/** The output of a COMPLETED run, parsed from `output_json`. */
export function output(result: RunResult): unknown {
  assert.equal(result.status, RunStatus.COMPLETED, `run ended ${RunStatus[result.status]}: ${result.failure?.message}`);
  return JSON.parse(result.outputJson);
}

/** The state a result carries. */
export function stateOf(result: RunResult): HarnessState {
  assert.ok(result.state, "the result carries a state");
  return result.state;
}
