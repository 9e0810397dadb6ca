/**
 * Persisting envelopes (and any other contract message) in the two wire forms of the contract.
 *
 * A host stores the `HarnessState` a run returned and sends it back, unchanged, as the next run's
 * `previous_state`. Both forms are lossless:
 *
 * - `"binary"`: protobuf bytes. Decoding then re-encoding gives the identical bytes (fields the
 *   SDK does not know are kept and written back), so this is the form to store when bytes matter.
 * - `"json"`: proto3 JSON with the original field names (`thread_id`, `message_history`), the
 *   form `grpcurl` prints and the golden vectors use. Compare JSON as parsed values, not as text.
 *
 * Encoding and decoding stay side by side here, one pair per form.
 *
 * @module
 */

import { fromBinary, fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";

import { type HarnessState, HarnessStateSchema } from "./gen/threadline/v1/state_pb.js";

/** The two stored forms of a message: protobuf bytes, or proto3 JSON text. */
export type Format = "binary" | "json";

/** Encode a state envelope as protobuf bytes. */
export function encodeState(state: HarnessState, format?: "binary"): Uint8Array;
/** Encode a state envelope as proto3 JSON text with the proto field names. */
export function encodeState(state: HarnessState, format: "json"): string;
export function encodeState(state: HarnessState, format: Format = "binary"): Uint8Array | string {
  return format === "json" ? encodeMessage(HarnessStateSchema, state, "json") : encodeMessage(HarnessStateSchema, state);
}

/**
 * Decode a stored state envelope: bytes are read as protobuf, a string as proto3 JSON.
 *
 * @throws Error when the data is not a valid `HarnessState` in that form (JSON with unknown
 *   fields included). Whether the server can load the state is a separate question: ask
 *   `client.validateState`.
 */
export function decodeState(data: Uint8Array | string): HarnessState {
  return decodeMessage(HarnessStateSchema, data);
}

/** Encode any contract message (e.g. a `DeferredToolRequests` batch) as protobuf bytes. */
export function encodeMessage<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
  format?: "binary",
): Uint8Array;
/** Encode any contract message as proto3 JSON text with the proto field names. */
export function encodeMessage<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, format: "json"): string;
export function encodeMessage<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
  format: Format = "binary",
): Uint8Array | string {
  if (format === "json") {
    return toJsonString(schema, message, { useProtoFieldName: true });
  }
  return toBinary(schema, message);
}

/** Decode any contract message: bytes as protobuf, a string as proto3 JSON. */
export function decodeMessage<Desc extends DescMessage>(schema: Desc, data: Uint8Array | string): MessageShape<Desc> {
  if (typeof data === "string") {
    // Unknown JSON fields are an error: a JSON envelope from a newer contract cannot be kept
    // losslessly in this form, and silently dropping a field would corrupt the thread.
    return fromJsonString(schema, data, { ignoreUnknownFields: false });
  }
  return fromBinary(schema, data);
}
