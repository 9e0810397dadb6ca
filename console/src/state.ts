/**
 * The console's state: the one module that holds anything mutable, so "what the page shows now"
 * (the client, the server's description, the list's filters and page, the open thread, the run
 * being streamed) has one home. Modules render from it and write to it; none keeps state of its
 * own.
 *
 * @module
 */

import type { Checkpoint, GetServerInfoResponse, Thread, ThreadStatus, ThreadlineClient } from "../../clients/typescript/src/index.js";
import type { LiveRun } from "./live.js";

/** A run the console follows: its own turn, or another client's it joined. */
export interface FollowedRun {
  /** Ends our stream (the run itself goes on; `Cancel run` stops it). */
  readonly controller: AbortController;
  /** The thread it runs. */
  readonly threadId: string;
  /** The attempt's run ID, once `runStarted` (or the lease) named it; "" before. */
  runId: string;
  /** Where its events show (the Live output). */
  readonly view: LiveRun;
}

/** The threads list: its filters and where the paging stands. */
export interface ListState {
  labels: Record<string, string>;
  status: ThreadStatus;
  /** The token of the page shown ("" = the first). */
  pageToken: string;
  /** The token of the page after it ("" = this is the last). */
  nextPageToken: string;
  /** 1-based, for the reader. */
  page: number;
}

/** The open thread, as last read from the server. */
export interface ThreadState {
  /** The thread (FULL view: `head.state` set). Its `revision` is what every mutation sends as `expectedRevision`. */
  thread: Thread;
  /** Its checkpoints, newest first (without states). */
  checkpoints: Checkpoint[];
  /** True when the listing was cut short (a very long thread). */
  more: boolean;
}

/** Everything the page shows and acts through. */
export interface AppState {
  /** The HTTP port the client calls: this page's origin, or `?server=`. */
  baseUrl: string;
  /** The bearer token (`--token` servers); "" = none. */
  token: string;
  /** The client, remade when the token changes. */
  client: ThreadlineClient | undefined;
  /** The server's description (`GetServerInfo`), once read. */
  info: GetServerInfoResponse | undefined;
  list: ListState;
  /** The open thread; undefined when none is. */
  open: ThreadState | undefined;
  /** Bumped by every thread load, so a slow answer for a thread no longer open is dropped. */
  loadSequence: number;
  /** The run whose events the Live output shows while they stream. */
  run: FollowedRun | undefined;
}

/** The state of this page. */
export const app: AppState = {
  baseUrl: "",
  token: "",
  client: undefined,
  info: undefined,
  list: { labels: {}, status: 0, pageToken: "", nextPageToken: "", page: 1 },
  open: undefined,
  loadSequence: 0,
  run: undefined,
};

/** The client; calling before `connect` is a bug. */
export function client(): ThreadlineClient {
  if (app.client === undefined) {
    throw new Error("The console is not connected to a server yet.");
  }
  return app.client;
}
