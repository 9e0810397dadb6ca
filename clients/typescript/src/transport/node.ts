/**
 * The default transport in Node: gRPC over HTTP/2 (`@connectrpc/connect-node`), one connection per
 * client, to the server's gRPC port.
 *
 * @module
 */

import type { Interceptor, Transport } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";

/** A transport and how to close what it holds open. */
export interface DefaultTransport {
  readonly transport: Transport;
  close(): void;
}

/** gRPC over one HTTP/2 connection to `baseUrl`, opened on the first call. */
export function defaultTransport(baseUrl: string, interceptors: Interceptor[]): DefaultTransport {
  const sessionManager = new Http2SessionManager(baseUrl);
  return {
    transport: createGrpcTransport({ baseUrl, sessionManager, interceptors }),
    close: () => sessionManager.abort(),
  };
}
