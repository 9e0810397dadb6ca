// The server and client a scenario file shares: importing this module starts the suite's server
// (`startServer()`: `THREADLINE_ADDR`'s, or one of the file's own) and a client of it, with the
// token in `THREADLINE_TOKEN`, before the file's tests, and closes both after them.

import { after, before } from "node:test";

import { type ThreadlineClient, createThreadlineClient } from "../src/index.js";
import { type TestServer, startServer } from "./server.js";

/** The suite's server, from the file's `before` on. */
export let server: TestServer;
/** A client of `server`, from the file's `before` on. */
export let client: ThreadlineClient;

before(async () => {
  server = await startServer();
  client = createThreadlineClient({ baseUrl: server.baseUrl, token: process.env["THREADLINE_TOKEN"], timeoutMs: 30_000 });
});

after(async () => {
  client?.close();
  await server?.stop();
});
