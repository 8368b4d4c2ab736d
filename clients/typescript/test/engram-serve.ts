/**
 * Starts one `engram serve` for the whole test run: a free loopback port, a fresh
 * `ENGRAM_DATA_DIR`, the in-process Redis, and a small ingest rate limit so that a real 429
 * can be met. Dev tokens are minted with `engram token` on the same data dir. The command is
 * `$ENGRAM_CMD` (the Makefile passes `uv run engram`), run from the repository root.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";

const REPO = resolve(import.meta.dirname, "..", "..", "..");
const START_TIMEOUT_MS = 90_000;

declare module "vitest" {
  export interface ProvidedContext {
    engramUrl: string;
    engramDataDir: string;
    engramCmd: string[];
  }
}

function command(): string[] {
  return (process.env.ENGRAM_CMD ?? "uv run engram").split(/\s+/).filter(Boolean);
}

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

function serviceEnv(dataDir: string, port: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith("ENGRAM_") || name === "REDIS_URL") delete env[name];
  }
  return {
    ...env,
    ENGRAM_DATA_DIR: dataDir,
    ENGRAM_HOST: "127.0.0.1",
    ENGRAM_PORT: String(port),
    ENGRAM_OBSERVATIONS_PER_MINUTE: "200",
  };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dataDir = mkdtempSync(join(tmpdir(), "engram-ts-"));
  const port = await freePort();
  const [cmd, ...args] = command();
  const logPath = join(dataDir, "serve.log");
  const log = openSync(logPath, "a");
  const child: ChildProcess = spawn(cmd as string, [...args, "serve"], {
    cwd: REPO,
    env: serviceEnv(dataDir, port),
    stdio: ["ignore", log, log],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`engram serve exited (${child.exitCode}):\n${readFileSync(logPath, "utf8")}`);
    }
    try {
      const health = await fetch(`${url}/v1/health`);
      if (health.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGTERM");
      throw new Error(`engram serve did not start:\n${readFileSync(logPath, "utf8")}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  project.provide("engramUrl", url);
  project.provide("engramDataDir", dataDir);
  project.provide("engramCmd", command());
  return async () => {
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    if (child.exitCode === null) child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  };
}

/** A dev token of the running service (`engram token`). */
export function mintToken(
  cmd: string[],
  dataDir: string,
  user: string,
  team: string,
  flags: string[] = [],
): string {
  const [bin, ...args] = cmd;
  const out = spawnSync(bin as string, [...args, "token", "--user", user, "--team", team, ...flags], {
    cwd: REPO,
    env: { ...serviceEnv(dataDir, 0) },
    encoding: "utf8",
  });
  if (out.status !== 0) throw new Error(`engram token failed: ${out.stderr}`);
  return out.stdout.trim();
}
