/**
 * Checkpoint candidates in CHECKPOINT_FORM_DELTA, made whole before the host sees them.
 *
 * Full candidates each repeat the whole history, so a run's candidates together grow with the
 * square of its length. So `streamRun` asks for CHECKPOINT_FORM_DELTA unless the host chose a form,
 * and undoes it here: a delta candidate's `message_history.data` is empty, and its `history_delta`
 * rebuilds it from the previous candidate's (keep a byte prefix, append text). The SDK rebuilds it,
 * checks it against the candidate's `sha256` and puts it back in the state, so the host gets
 * complete states either way and the wire carries only what the run added.
 *
 * Not public: the client uses it, the tests reach it directly.
 *
 * @module
 */

import { sha256 } from "@noble/hashes/sha2.js";

import { ProtocolError } from "./errors.js";
import type { RunEvent } from "./gen/threadline/v1/events_pb.js";
import type { RunSpec } from "./gen/threadline/v1/run_pb.js";

/** The history data of one stream's checkpoint candidates, rebuilt candidate by candidate. */
export class CandidateHistories {
  /**
   * What the next delta applies to: the previous candidate's history data, or for the first one
   * the previous state's as the host sent it (`[]` without one). Kept as text until a delta needs
   * its bytes, so full candidates cost nothing.
   */
  #base: string | Uint8Array;

  /** @param spec - The spec the stream was started with: its `previous_state` is the first base. */
  constructor(spec: RunSpec) {
    this.#base = spec.previousState === undefined ? "[]" : (spec.previousState.messageHistory?.data ?? "");
  }

  /**
   * Complete `event` in place when it is a delta candidate: set its `message_history.data` to the
   * rebuilt history (`history_delta` stays), and keep that as the next base. Other events pass.
   *
   * @throws ProtocolError when the candidate has no history to rebuild, the delta does not fit its
   *   base, or the rebuilt data does not match the candidate's `sha256`; the base stays as it was.
   */
  complete(event: RunEvent): void {
    if (event.event.case !== "checkpointCandidate") {
      return;
    }
    const { state, historyDelta } = event.event.value;
    const history = state?.messageHistory;
    if (historyDelta === undefined) {
      this.#base = history?.data ?? "";
      return;
    }
    const broken = (why: string) =>
      new ProtocolError(`the checkpoint candidate at sequence ${event.sequence} does not rebuild: ${why}`);
    if (history === undefined) {
      throw broken("its history_delta has no state.message_history to rebuild");
    }
    const base = typeof this.#base === "string" ? UTF8.encode(this.#base) : this.#base;
    const { keepBytes, append } = historyDelta;
    if (keepBytes > BigInt(base.length)) {
      throw broken(`its history_delta keeps ${keepBytes} bytes of a base that has ${base.length}`);
    }
    const added = UTF8.encode(append);
    const data = new Uint8Array(Number(keepBytes) + added.length);
    data.set(base.subarray(0, Number(keepBytes)));
    data.set(added, Number(keepBytes));
    if (!sameBytes(sha256(data), history.sha256)) {
      throw broken("its rebuilt history does not match message_history.sha256");
    }
    history.data = new TextDecoder("utf-8").decode(data);
    this.#base = data;
  }
}

/** UTF-8, in Node and in browsers alike (no `Buffer`): the SDK runs in both. */
const UTF8 = new TextEncoder();

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, index) => byte === b[index]);
}
