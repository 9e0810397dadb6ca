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

import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";

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
  #base: string | Buffer;

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
    const base = typeof this.#base === "string" ? Buffer.from(this.#base, "utf8") : this.#base;
    const { keepBytes, append } = historyDelta;
    if (keepBytes > BigInt(base.length)) {
      throw broken(`its history_delta keeps ${keepBytes} bytes of a base that has ${base.length}`);
    }
    const data = Buffer.concat([base.subarray(0, Number(keepBytes)), Buffer.from(append, "utf8")]);
    if (!createHash("sha256").update(data).digest().equals(history.sha256)) {
      throw broken("its rebuilt history does not match message_history.sha256");
    }
    history.data = data.toString("utf8");
    this.#base = data;
  }
}
