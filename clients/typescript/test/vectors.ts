// The golden vectors of `tests/vectors/` (DESIGN "Tests", tests/vectors/README.md): messages the
// server's own mapping produced. `manifest.json` maps each vector name to its message type; every
// vector comes as `<name>.binpb` (must re-encode to the identical bytes) and `<name>.json` (proto3
// JSON with the original field names; must re-encode to the same parsed JSON value).

import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import { createRegistry } from "@bufbuild/protobuf";
import type { DescMessage } from "@bufbuild/protobuf";

import { decodeMessage, encodeMessage } from "../src/codec.js";
import { file_threadline_v1_deferred } from "../src/gen/threadline/v1/deferred_pb.js";
import { file_threadline_v1_events } from "../src/gen/threadline/v1/events_pb.js";
import { file_threadline_v1_harness_service } from "../src/gen/threadline/v1/harness_service_pb.js";
import { file_threadline_v1_run } from "../src/gen/threadline/v1/run_pb.js";
import { file_threadline_v1_state } from "../src/gen/threadline/v1/state_pb.js";
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
