import { unwrap } from "@engram/client";
import { afterEach, describe, expect, it, vi } from "vitest";

import { createApi } from "../src/api";
import { DevAuth } from "../src/auth/dev-sign-in";
import { SignInRequired } from "../src/auth/tokens";
import { parseConfig } from "../src/config";
import { MemoryStorage } from "./support";

const token = (claims: Record<string, unknown>) =>
  `e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`;

describe("the dev sign-in (local build)", () => {
  it("posts the form to /dev/sign-in and keeps the token until it expires", async () => {
    let now = 1_800_000_000_000;
    const idToken = token({ sub: "alice", "custom:team": "acme", exp: now / 1000 + 600 });
    const sent: { url: string; body: unknown; type: string | null }[] = [];
    const send = (async (input: RequestInfo | URL, init?: RequestInit) => {
      sent.push({ url: String(input), body: JSON.parse(String(init?.body)), type: new Headers(init?.headers).get("content-type") });
      return new Response(JSON.stringify({ idToken, expiresIn: 600 }), { status: 200 });
    }) as typeof fetch;
    const storage = new MemoryStorage();
    const auth = new DevAuth("", storage, send, () => now);
    await auth.signIn({ user: "alice", team: "acme", admin: false, teamAdmin: true });
    expect(sent).toEqual([
      { url: "/dev/sign-in", body: { user: "alice", team: "acme", admin: false, teamAdmin: true }, type: "application/json" },
    ]);
    expect(await auth.idToken()).toBe(idToken);
    // another DevAuth over the same storage (a reload of the tab) is still signed in
    expect(await new DevAuth("", storage, send, () => now).idToken()).toBe(idToken);
    now += 601_000;
    await expect(auth.idToken()).rejects.toBeInstanceOf(SignInRequired);
    expect(auth.current()).toBeNull();
  });

  it("reports a refused sign-in with the service's message", async () => {
    const send = (async () =>
      new Response(JSON.stringify({ error: { code: "forbidden", message: "only on loopback" } }), { status: 403 })) as typeof fetch;
    const auth = new DevAuth("", new MemoryStorage(), send);
    await expect(auth.signIn({ user: "a", team: "t", admin: false, teamAdmin: false })).rejects.toThrow(
      "The dev sign-in was refused: only on loopback",
    );
    expect(auth.current()).toBeNull();
  });
});

describe("the API client of the pages", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("sends the ID token as a bearer token, names the console as the surface, and ends the session on a 401", async () => {
    const seen: string[] = [];
    let status = 200;
    vi.stubGlobal("fetch", async (request: Request) => {
      seen.push(`${request.method} ${request.url} ${request.headers.get("authorization")} ${request.headers.get("x-engram-surface")}`);
      return status === 200
        ? new Response(JSON.stringify({ facts: [] }), { status, headers: { "content-type": "application/json" } })
        : new Response(JSON.stringify({ error: { code: "unauthorized", message: "expired" } }), {
            status,
            headers: { "content-type": "application/json" },
          });
    });
    const config = parseConfig({ apiUrl: "https://api.example.com", auth: { mode: "dev" } });
    const auth = { kind: "dev" as const, current: () => null, idToken: async () => "tok-1", signOut: () => null };
    const ended = vi.fn();
    const api = createApi(config, auth, ended);

    expect(await unwrap(api.api.GET("/v1/facts"))).toEqual({ facts: [] });
    expect(seen).toEqual(["GET https://api.example.com/v1/facts Bearer tok-1 console"]);
    expect(ended).not.toHaveBeenCalled();

    status = 401;
    await expect(unwrap(api.api.GET("/v1/facts"))).rejects.toMatchObject({ status: 401, code: "unauthorized" });
    expect(ended).toHaveBeenCalledTimes(1);
  });

  it("sends nothing when there is no token left", async () => {
    const fetcher = vi.fn();
    vi.stubGlobal("fetch", fetcher);
    const config = parseConfig({ apiUrl: "https://api.example.com", auth: { mode: "dev" } });
    const auth = {
      kind: "dev" as const,
      current: () => null,
      idToken: async () => {
        throw new SignInRequired("expired");
      },
      signOut: () => null,
    };
    const api = createApi(config, auth, () => undefined);
    await expect(unwrap(api.api.GET("/v1/facts"))).rejects.toBeInstanceOf(SignInRequired);
    expect(fetcher).not.toHaveBeenCalled();
  });
});
