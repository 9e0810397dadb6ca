// The golden vectors of `tests/vectors/` (DESIGN "Tests", tests/vectors/README.md): messages the
// server's own mapping produced. `manifest.json` maps each vector name to its message type; every
// vector comes as `<name>.binpb` (must re-encode to the identical bytes) and `<name>.json` (proto3
// JSON with the original field names; must re-encode to the same parsed JSON value).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import { create, createRegistry } from "@bufbuild/protobuf";
import type { DescMessage } from "@bufbuild/protobuf";

import { CandidateHistories } from "../src/checkpoints.js";
import { decodeMessage, decodeState, encodeMessage, encodeState } from "../src/codec.js";
import { file_threadline_v1_deferred } from "../src/gen/threadline/v1/deferred_pb.js";
import { RunEventSchema, file_threadline_v1_events } from "../src/gen/threadline/v1/events_pb.js";
import { file_threadline_v1_harness_service } from "../src/gen/threadline/v1/harness_service_pb.js";
import { RunSpecSchema, file_threadline_v1_run } from "../src/gen/threadline/v1/run_pb.js";
import { EnvironmentStateSchema, file_threadline_v1_state } from "../src/gen/threadline/v1/state_pb.js";
import { REPO_ROOT } from "./server.js";

export const VECTORS_DIR = join(REPO_ROOT, "tests", "vectors");

/** Every message of the contract, by fully qualified name. */
const REGISTRY = createRegistry(
  file_threadline_v1_state,
  file_threadline_v1_deferred,
  file_threadline_v1_run,
  file_threadline_v1_events,
  file_threadline_v1_harness_service,
);

/** The vector names and their fully qualified message types, from `manifest.json`. */
export function manifest(): [name: string, typeName: string][] {
  const entries = JSON.parse(readFileSync(join(VECTORS_DIR, "manifest.json"), "utf8")) as Record<string, string>;
  return Object.entries(entries).sort(([a], [b]) => a.localeCompare(b));
}

/** Vector files in the folder that the manifest does not name (should be none). */
export function unlistedFiles(): string[] {
  const listed = new Set(manifest().flatMap(([name]) => [`${name}.binpb`, `${name}.json`]));
  return readdirSync(VECTORS_DIR)
    .filter((file) => (file.endsWith(".binpb") || file.endsWith(".json")) && file !== "manifest.json")
    .filter((file) => !listed.has(file));
}

/** Decode vector `name` in both forms and check that re-encoding gives each back. */
export function checkVector(name: string, typeName: string): void {
  const schema: DescMessage | undefined = REGISTRY.getMessage(typeName);
  assert.ok(schema, `${name}: ${typeName} is not a message of this contract`);

  const binary = join(VECTORS_DIR, `${name}.binpb`);
  assert.ok(existsSync(binary), `${name}.binpb is missing`);
  const bytes = new Uint8Array(readFileSync(binary));
  const fromBytes = decodeMessage(schema, bytes);
  assert.deepEqual(encodeMessage(schema, fromBytes), bytes, `${name}.binpb: re-encoded bytes differ`);

  const json = join(VECTORS_DIR, `${name}.json`);
  assert.ok(existsSync(json), `${name}.json is missing`);
  const text = readFileSync(json, "utf8");
  const fromJson = decodeMessage(schema, text);
  assert.deepEqual(JSON.parse(encodeMessage(schema, fromJson, "json")), JSON.parse(text), `${name}.json: re-encoded JSON differs`);

  // Both forms hold the same message.
  assert.deepEqual(encodeMessage(schema, fromJson), bytes, `${name}: the JSON and binary forms differ`);
}

/**
 * Rebuild `checkpoint_delta` (both forms) as a stream continuing `state_full` would: its base is
 * `state_full`'s history data, and the result must match the candidate's `sha256`.
 */
export function checkDeltaVector(): void {
  const previousState = decodeState(new Uint8Array(readFileSync(join(VECTORS_DIR, "state_full.binpb"))));
  const base = Buffer.from(previousState.messageHistory!.data, "utf8");
  for (const form of ["binpb", "json"] as const) {
    const file = join(VECTORS_DIR, `checkpoint_delta.${form}`);
    const stored = form === "binpb" ? new Uint8Array(readFileSync(file)) : readFileSync(file, "utf8");
    const event = decodeMessage(RunEventSchema, stored);
    assert.ok(event.event.case === "checkpointCandidate", `checkpoint_delta.${form} is a checkpoint candidate`);
    const { state, historyDelta } = event.event.value;
    assert.ok(state?.messageHistory && historyDelta);
    assert.equal(state.messageHistory.data, "", `checkpoint_delta.${form} carries its history as a delta only`);

    // The SDK's own rebuild: it throws unless the data matches `sha256`.
    new CandidateHistories(create(RunSpecSchema, { previousState, checkpoints: true })).complete(event);
    const data = state.messageHistory.data;
    assert.ok(createHash("sha256").update(data, "utf8").digest().equals(state.messageHistory.sha256));
    assert.equal(BigInt((JSON.parse(data) as unknown[]).length), state.messageHistory.messageCount);
    // Bytes, not characters: the kept prefix is state_full's, and the appended text is not ASCII.
    const keep = Number(historyDelta.keepBytes);
    assert.ok(keep > 0 && keep < base.length);
    assert.deepEqual(Buffer.from(data, "utf8").subarray(0, keep), base.subarray(0, keep));
    assert.notEqual(Buffer.byteLength(historyDelta.append, "utf8"), historyDelta.append.length);
  }
}

/**
 * Read `state_environment` (both forms) with the SDK's own `decodeState`: the server's own
 * `threadline_local` entry, and a `docker` entry the SDK carries byte for byte through `encodeState`.
 */
export function checkStateEnvironmentVector(): void {
  const binary = new Uint8Array(readFileSync(join(VECTORS_DIR, "state_environment.binpb")));
  for (const stored of [binary, readFileSync(join(VECTORS_DIR, "state_environment.json"), "utf8")]) {
    const state = decodeState(stored);
    assert.equal(state.environmentStates.length, 2);
    const [work, box] = state.environmentStates;
    assert.deepEqual([work!.mountName, work!.providerKey, work!.stateVersion], ["work", "threadline_local", "1"]);
    const local = JSON.parse(work!.stateJson) as { commands: unknown[] };
    assert.deepEqual(Object.keys(local).sort(), ["backend", "commands", "scope"]);
    assert.equal(local.commands.length, 2);
    assert.deepEqual([box!.mountName, box!.providerKey, box!.stateVersion, box!.stateJson], ["box", "docker", "1.0", '{"container":"c-1"}']);

    // The SDK's re-encoding carries the entry it cannot read byte for byte.
    const boxBytes = Buffer.from(encodeMessage(EnvironmentStateSchema, box!));
    const again = Buffer.from(encodeState(state));
    assert.ok(Buffer.from(binary).includes(boxBytes), "the vector holds the box entry's bytes");
    assert.ok(again.includes(boxBytes), "the re-encoded state holds the box entry's bytes unchanged");
    assert.deepEqual(decodeState(new Uint8Array(again)).environmentStates[1], box);
  }
}
