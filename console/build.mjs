// Build the web console's script into server/console/console.js (what `threadline serve --console`
// serves, beside the page and style sheet written there by hand, server/console/index.html and
// console.css): console/src/main.ts bundled by esbuild for the browser (the SDK's `#transport` then
// resolves to Connect over fetch).
//
//   node console/build.mjs              # into server/console/
//   node console/build.mjs --out DIR    # elsewhere (a test compares it with server/console/)
//
// esbuild comes from clients/typescript/node_modules (the SDK's own dev dependency), so the console
// needs no package of its own. The output is deterministic: the same sources give the same bytes
// (no sourcemap, no legal comments, paths relative to the repo root whatever the working directory).

import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const { values } = parseArgs({ options: { out: { type: "string" } } });
const out = values.out === undefined ? join(root, "server", "console") : resolve(values.out);
const require = createRequire(join(root, "clients", "typescript", "package.json"));
const { build } = require("esbuild");

mkdirSync(out, { recursive: true });
await build({
  absWorkingDir: root,
  entryPoints: [join(here, "src", "main.ts")],
  outfile: join(out, "console.js"),
  bundle: true,
  platform: "browser",
  format: "esm",
  target: "es2022",
  minify: false,
  sourcemap: false,
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
console.log(`built ${join(out, "console.js")}`);
