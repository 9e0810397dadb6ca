/**
 * How contract values read on the page: enum values by their short proto names (`COMPLETED`, as
 * the server's logs and docs spell them), timestamps as local times, labels as `key=value`.
 *
 * @module
 */

/** A Timestamp as the generated code gives it (`google.protobuf.Timestamp`). */
interface Timestamp {
  readonly seconds: bigint;
  readonly nanos: number;
}

/** A TypeScript numeric enum's reverse map, as protobuf-es generates enums. */
type EnumObject = Record<number, string>;

/** An enum value's name without its prefix (`RunStatus.COMPLETED` → `COMPLETED`); the number for a value this build does not know. */
export function enumName(values: EnumObject, value: number): string {
  return values[value] ?? String(value);
}

/** A timestamp as a `Date`; undefined when unset. */
export function toDate(timestamp: Timestamp | undefined): Date | undefined {
  if (timestamp === undefined) {
    return undefined;
  }
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1e6));
}

/** A `<time>`-ready pair: the ISO form for `datetime`, and a short local form to read. */
export function timeText(timestamp: Timestamp | undefined): { iso: string; text: string } | undefined {
  const date = toDate(timestamp);
  if (date === undefined || Number.isNaN(date.getTime())) {
    return undefined;
  }
  return {
    iso: date.toISOString(),
    text: date.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" }),
  };
}

/** Labels as `key=value` items, sorted for a stable display. */
export function labelItems(labels: Readonly<Record<string, string>>): string[] {
  return Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`);
}

/**
 * Parse `key=value` pairs separated by commas or spaces (the label filter, a new thread's labels).
 *
 * @throws LabelSyntaxError naming the first item without a key.
 */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const item of text.split(/[,\s]+/).filter((part) => part !== "")) {
    const at = item.indexOf("=");
    if (at <= 0) {
      throw new LabelSyntaxError(`"${item}" is not key=value (labels are key=value, separated by commas or spaces).`);
    }
    labels[item.slice(0, at)] = item.slice(at + 1);
  }
  return labels;
}

/** A label filter or a new thread's labels that do not read as `key=value` pairs. */
export class LabelSyntaxError extends SyntaxError {
  override name = "Invalid labels";
}
