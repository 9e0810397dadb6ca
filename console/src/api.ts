/**
 * Reaching the server: which HTTP port, with which token, and whether its thread store answers.
 *
 * The page calls the services same-origin (the server serves the console beside them); for
 * development `?server=http://127.0.0.1:PORT` points it at another HTTP port, which must then name
 * this page's origin in `--http-cors-origin`.
 *
 * @module
 */

import { Code, ThreadlineError, createThreadlineClient } from "../../clients/typescript/src/index.js";
import { app, client } from "./state.js";

/** Where the token is kept: this tab's session only, never a cookie or local storage. */
const TOKEN_KEY = "threadline.console.token";

/**
 * The HTTP port to call: `?server=` when it is an http(s) URL, else this page's origin.
 *
 * @throws TypeError for a `?server=` that is not an http(s) URL (better refused than half-used).
 */
export function serverUrl(location: Location): string {
  const given = new URLSearchParams(location.search).get("server");
  if (given === null || given === "") {
    return location.origin;
  }
  const url = new URL(given);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`?server= must be an http:// or https:// URL, not ${given}`);
  }
  return url.origin + url.pathname.replace(/\/+$/, "");
}

/** The token kept for this tab ("" when none, or when storage is blocked). */
export function loadToken(): string {
  try {
    return sessionStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}

/** Keep the token for this tab; "" forgets it. A blocked storage only loses it on reload. */
export function saveToken(token: string): void {
  try {
    if (token === "") {
      sessionStorage.removeItem(TOKEN_KEY);
    } else {
      sessionStorage.setItem(TOKEN_KEY, token);
    }
  } catch {
    // Storage disabled (private mode, policy): the token still works until the page reloads.
  }
}

/** (Re)make the client for `app.baseUrl` and `app.token`; in a browser there is nothing to close, but the old client is closed anyway. */
export function connect(): void {
  app.client?.close();
  app.client = createThreadlineClient({ baseUrl: app.baseUrl, token: app.token });
}

/** The thread store's health as the console tells it. */
export type StoreHealth =
  | { readonly state: "serving" }
  | { readonly state: "not serving"; readonly error: ThreadlineError }
  | { readonly state: "not served"; readonly error: ThreadlineError }
  | { readonly state: "unknown"; readonly error: ThreadlineError };

/**
 * Ask the store something cheap (one thread of the list): an answer means it serves;
 * UNAVAILABLE (`STORE_UNAVAILABLE`, or the server unreachable) means it does not; UNIMPLEMENTED
 * means the server keeps no threads (`--store none`). Anything else (a refused token) is unknown.
 */
export async function storeHealth(): Promise<StoreHealth> {
  try {
    await client().threads.listPage({ pageSize: 1 });
    return { state: "serving" };
  } catch (err) {
    const error = ThreadlineError.from(err);
    if (error.code === Code.Unavailable || error.reason === "STORE_UNAVAILABLE") {
      return { state: "not serving", error };
    }
    if (error.code === Code.Unimplemented) {
      return { state: "not served", error };
    }
    return { state: "unknown", error };
  }
}
