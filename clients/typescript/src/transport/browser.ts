/**
 * The default transport in a browser: the Connect protocol over `fetch` (`@connectrpc/connect-web`),
 * binary, to the server's HTTP port (`threadline serve --http-port`). A page of another origin needs
 * that origin in the server's `--http-cors-origin`.
 *
 * @module
 */

import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

/** A transport and how to close what it holds open. */
export interface DefaultTransport {
  readonly transport: Transport;
  close(): void;
}

/** Connect over `fetch` to `baseUrl`; each call is its own request, so there is nothing to close. */
export function defaultTransport(baseUrl: string, interceptors: Interceptor[]): DefaultTransport {
  return {
    transport: createConnectTransport({ baseUrl, interceptors, useBinaryFormat: true }),
    close: () => undefined,
  };
}
