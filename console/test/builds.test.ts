/**
 * The two builds, built for real: the AWS build has no trace of the dev sign-in (its form,
 * its route, its heading), and the local build does, so the check can fail.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");
const FORBIDDEN = ["/dev/sign-in", "Dev sign-in", "dev-sign-in.tsx", "Global admin"];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

function assetsText(dir: string): string {
  return files(dir)
    .map((path) => readFileSync(path, "utf8"))
    .join("\n");
}

describe("builds", () => {
  const out = mkdtempSync(join(process.env.TMPDIR ?? tmpdir(), "engram-console-build-"));
  let aws = "";
  let local = "";

  beforeAll(async () => {
    for (const [mode, dir] of [
      ["aws", join(out, "aws")],
      ["production", join(out, "local")],
    ] as const) {
      await build({ root: ROOT, mode, logLevel: "error", build: { outDir: dir, emptyOutDir: true } });
    }
    aws = assetsText(join(out, "aws"));
    local = assetsText(join(out, "local"));
  });

  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("leaves the dev sign-in out of the AWS build", () => {
    for (const text of FORBIDDEN) expect(aws, text).not.toContain(text);
    expect(aws).toContain("/oauth2/token");
    expect(aws).toContain("code_challenge_method");
  });

  it("keeps the dev sign-in in the local build (so the check above can fail)", () => {
    expect(local).toContain("/dev/sign-in");
    expect(local).toContain("Dev sign-in");
    expect(local).toContain("/oauth2/token");
  });

  it("builds one page that loads its config at start", () => {
    for (const dir of ["aws", "local"]) {
      const html = readFileSync(join(out, dir, "index.html"), "utf8");
      expect(html).toMatch(/<script type="module" crossorigin src="\/assets\/index-[^"]+\.js">/);
    }
    expect(aws).toContain("/config.json");
  });
});
