/** The committed types are what the generator makes of docs/openapi.json today. */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { expect, test } from "vitest";

import pkg from "../package.json" with { type: "json" };

const ROOT = resolve(import.meta.dirname, "..");

test("src/schema.d.ts is generated from the current docs/openapi.json", () => {
  const out = join(mkdtempSync(join(tmpdir(), "engram-types-")), "schema.d.ts");
  // the package's own generate script, writing elsewhere
  const script = pkg.scripts.generate.replace("--output src/schema.d.ts", `--output ${out}`);
  const [bin, ...args] = script.split(" ");
  const run = spawnSync(join(ROOT, "node_modules", ".bin", bin as string), args, {
    cwd: ROOT,
    encoding: "utf8",
  });
  expect(run.status, run.stderr).toBe(0);
  const committed = readFileSync(join(ROOT, "src", "schema.d.ts"), "utf8");
  expect(
    readFileSync(out, "utf8") === committed,
    "src/schema.d.ts is stale: docs/openapi.json changed; run `npm run generate` in clients/typescript",
  ).toBe(true);
});
