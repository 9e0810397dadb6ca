// The golden vectors of `tests/vectors/` (DESIGN "Tests"): envelopes, deferred batches and event
// streams the server produced. Every client must decode them and write them back: `*.binpb` to
// the identical bytes, `*.json` (proto3 JSON, original field names) to the same parsed JSON value.

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import type { DescMessage } from "@bufbuild/protobuf";

import { decodeMessage, encodeMessage } from "../src/codec.js";
import { file_threadline_v1_deferred } from "../src/gen/threadline/v1/deferred_pb.js";
import { file_threadline_v1_events } from "../src/gen/threadline/v1/events_pb.js";
import { file_threadline_v1_harness_service } from "../src/gen/threadline/v1/harness_service_pb.js";
import { file_threadline_v1_run } from "../src/gen/threadline/v1/run_pb.js";
import { file_threadline_v1_state } from "../src/gen/threadline/v1/state_pb.js";
import { REPO_ROOT } from "./server.js";

export const VECTORS_DIR = join(REPO_ROOT, "tests", "vectors");

/** Every message of the contract by its snake_case name (`harness_state`, `run_event`, …). */
const MESSAGES = new Map<string, DescMessage>(
  [
    file_threadline_v1_state,
    file_threadline_v1_deferred,
    file_threadline_v1_run,
    file_threadline_v1_events,
    file_threadline_v1_harness_service,
  ]
    .flatMap((file) => file.messages)
    .map((desc) => [snake(desc.name), desc]),
);

/** The vector files, sorted: `*.binpb` and `*.json` in the folder and its subfolders. */
export function vectorFiles(): string[] {
  return readdirSync(VECTORS_DIR, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".binpb") || name.endsWith(".json"))
    .sort();
}

/**
 * The message a vector holds, from its file name: the longest snake_case message name the base
 * name starts with (`harness_state_suspended.binpb` is a `HarnessState`).
 */
export function schemaOf(file: string): DescMessage {
  const base = file.split("/").at(-1)!.replace(/\.(binpb|json)$/, "");
  let best: DescMessage | undefined;
  for (const [name, desc] of MESSAGES) {
    if ((base === name || base.startsWith(`${name}_`) || base.startsWith(`${name}.`)) && name.length > snake(best?.name ?? "").length) {
      best = desc;
    }
  }
  assert.ok(best, `no threadline.v1 message matches the vector name ${file}`);
  return best;
}

/** Decode one vector and check that re-encoding gives it back. */
export function checkVector(file: string): void {
  const schema = schemaOf(file);
  const path = join(VECTORS_DIR, file);
  if (file.endsWith(".binpb")) {
    const bytes = new Uint8Array(readFileSync(path));
    const message = decodeMessage(schema, bytes);
    assert.deepEqual(encodeMessage(schema, message), bytes, `${file}: re-encoded bytes differ`);
  } else {
    const text = readFileSync(path, "utf8");
    const message = decodeMessage(schema, text);
    assert.deepEqual(JSON.parse(encodeMessage(schema, message, "json")), JSON.parse(text), `${file}: re-encoded JSON differs`);
  }
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (letter, index: number) => (index === 0 ? "" : "_") + letter.toLowerCase());
}
