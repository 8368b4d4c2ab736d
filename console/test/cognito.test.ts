import { beforeEach, describe, expect, it } from "vitest";

import { CognitoAuth, REFRESH_MARGIN_MS, SignInError } from "../src/auth/cognito";
import { challengeFor } from "../src/auth/pkce";
import { SignInRequired } from "../src/auth/tokens";
import type { CognitoAuthConfig } from "../src/config";
import { MemoryStorage } from "./support";

const CONFIG: CognitoAuthConfig = {
  mode: "cognito",
  domain: "https://engram-dev.auth.eu-west-1.amazoncognito.com",
  clientId: "client123",
  redirectUri: "https://console.example.com/callback",
  logoutUri: "https://console.example.com/",
  scopes: ["openid", "email", "profile"],
};

function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  return `${part({ alg: "RS256", kid: "k" })}.${part(claims)}.c2ln`;
}

interface Sent {
  url: string;
  form: URLSearchParams;
}

function tokenEndpoint(answers: Array<{ status: number; body: unknown }>) {
  const sent: Sent[] = [];
  const fetcher = (async (input: RequestInfo | URL, init?: RequestInit) => {
    sent.push({ url: String(input), form: new URLSearchParams(String(init?.body)) });
    expect(init?.method).toBe("POST");
    expect(new Headers(init?.headers).get("content-type")).toBe("application/x-www-form-urlencoded");
    const answer = answers.shift();
    if (answer === undefined) throw new Error("no more answers");
    return new Response(JSON.stringify(answer.body), { status: answer.status });
  }) as typeof fetch;
  return { sent, fetcher };
}

describe("Cognito hosted UI sign-in (authorization code + PKCE)", () => {
  let storage: MemoryStorage;
  let now: number;

  beforeEach(() => {
    storage = new MemoryStorage();
    now = 1_800_000_000_000;
  });

  async function signIn(auth: CognitoAuth): Promise<URL> {
    const authorize = new URL(await auth.authorizeUrl("#/review"));
    return authorize;
  }

  it("sends the person to the hosted UI with an S256 challenge of a verifier it keeps", async () => {
    const auth = new CognitoAuth(CONFIG, { fetch: tokenEndpoint([]).fetcher, storage, now: () => now });
    const url = await signIn(auth);
    expect(url.origin + url.pathname).toBe(`${CONFIG.domain}/oauth2/authorize`);
    const q = url.searchParams;
    expect(q.get("response_type")).toBe("code");
    expect(q.get("client_id")).toBe("client123");
    expect(q.get("redirect_uri")).toBe(CONFIG.redirectUri);
    expect(q.get("scope")).toBe("openid email profile");
    expect(q.get("code_challenge_method")).toBe("S256");
    const pending = JSON.parse(storage.getItem("engram.console.pkce") ?? "{}") as { state: string; verifier: string };
    expect(q.get("state")).toBe(pending.state);
    expect(pending.state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get("code_challenge")).toBe(await challengeFor(pending.verifier));
    expect(url.toString()).not.toContain(pending.verifier);
  });

  it("exchanges the code with the verifier when the state matches, and keeps the ID token", async () => {
    const idToken = jwt({ sub: "alice", "custom:team": "acme", exp: now / 1000 + 3600 });
    const { sent, fetcher } = tokenEndpoint([
      { status: 200, body: { id_token: idToken, access_token: "at", refresh_token: "rt", expires_in: 3600 } },
    ]);
    const auth = new CognitoAuth(CONFIG, { fetch: fetcher, storage, now: () => now });
    const state = (await signIn(auth)).searchParams.get("state");
    const { verifier } = JSON.parse(storage.getItem("engram.console.pkce") ?? "{}") as { verifier: string };
    const callback = new URL(`${CONFIG.redirectUri}?code=abc&state=${state}`);
    expect(auth.isCallback(callback)).toBe(true);
    expect(await auth.completeSignIn(callback)).toBe("#/review");

    expect(sent).toHaveLength(1);
    expect(sent[0]?.url).toBe(`${CONFIG.domain}/oauth2/token`);
    expect(Object.fromEntries(sent[0]?.form ?? [])).toEqual({
      grant_type: "authorization_code",
      client_id: "client123",
      code: "abc",
      redirect_uri: CONFIG.redirectUri,
      code_verifier: verifier,
    });
    expect(await auth.idToken()).toBe(idToken);
    expect(auth.current()?.refreshToken).toBe("rt");
    expect(auth.current()?.expiresAt).toBe(now + 3600_000);
    expect(storage.getItem("engram.console.pkce")).toBeNull();
  });

  it("refuses a callback whose state is not the one it sent, without asking for tokens", async () => {
    const { sent, fetcher } = tokenEndpoint([]);
    const auth = new CognitoAuth(CONFIG, { fetch: fetcher, storage, now: () => now });
    await signIn(auth);
    await expect(auth.completeSignIn(new URL(`${CONFIG.redirectUri}?code=abc&state=forged`))).rejects.toThrow(SignInError);
    expect(sent).toHaveLength(0);
    expect(auth.current()).toBeNull();
    // the pending sign-in is used up: replaying the right state later fails too
    await expect(auth.completeSignIn(new URL(`${CONFIG.redirectUri}?code=abc&state=x`))).rejects.toThrow(SignInError);
  });

  it("refuses a callback when no sign-in was started in this tab", async () => {
    const auth = new CognitoAuth(CONFIG, { fetch: tokenEndpoint([]).fetcher, storage, now: () => now });
    await expect(auth.completeSignIn(new URL(`${CONFIG.redirectUri}?code=abc&state=s`))).rejects.toThrow(/state/);
  });

  it("reports the hosted UI's error answer", async () => {
    const auth = new CognitoAuth(CONFIG, { fetch: tokenEndpoint([]).fetcher, storage, now: () => now });
    await signIn(auth);
    const url = new URL(`${CONFIG.redirectUri}?error=access_denied&error_description=User+cancelled`);
    expect(auth.isCallback(url)).toBe(true);
    await expect(auth.completeSignIn(url)).rejects.toThrow(/User cancelled/);
  });

  it("refreshes the ID token with the refresh token before it expires, once for concurrent callers", async () => {
    const first = jwt({ sub: "alice", exp: now / 1000 + 3600 });
    const second = jwt({ sub: "alice", exp: now / 1000 + 7200 });
    const { sent, fetcher } = tokenEndpoint([
      { status: 200, body: { id_token: first, refresh_token: "rt", expires_in: 3600 } },
      { status: 200, body: { id_token: second, access_token: "at2", expires_in: 3600 } },
    ]);
    const auth = new CognitoAuth(CONFIG, { fetch: fetcher, storage, now: () => now });
    const state = (await signIn(auth)).searchParams.get("state");
    await auth.completeSignIn(new URL(`${CONFIG.redirectUri}?code=c&state=${state}`));

    now += 3600_000 - REFRESH_MARGIN_MS - 1000; // still more than the margin left
    expect(await auth.idToken()).toBe(first);
    expect(sent).toHaveLength(1);

    now += 2000; // within the margin: refreshed before it expires
    const [a, b] = await Promise.all([auth.idToken(), auth.idToken()]);
    expect([a, b]).toEqual([second, second]);
    expect(sent).toHaveLength(2);
    expect(Object.fromEntries(sent[1]?.form ?? [])).toEqual({
      grant_type: "refresh_token",
      client_id: "client123",
      refresh_token: "rt",
    });
    // Cognito sends no new refresh token: the old one is kept
    expect(auth.current()?.refreshToken).toBe("rt");
  });

  it("asks the person to sign in again when the refresh token is refused", async () => {
    const first = jwt({ sub: "alice", exp: now / 1000 + 60 });
    const { fetcher } = tokenEndpoint([
      { status: 200, body: { id_token: first, refresh_token: "rt" } },
      { status: 400, body: { error: "invalid_grant" } },
    ]);
    const auth = new CognitoAuth(CONFIG, { fetch: fetcher, storage, now: () => now });
    const state = (await signIn(auth)).searchParams.get("state");
    await auth.completeSignIn(new URL(`${CONFIG.redirectUri}?code=c&state=${state}`));
    await expect(auth.idToken()).rejects.toBeInstanceOf(SignInRequired);
    expect(auth.current()).toBeNull();
  });

  it("signs out here and at the hosted UI", async () => {
    storage.setItem("engram.console.tokens", JSON.stringify({ idToken: "x.y.z", expiresAt: now + 1000 }));
    const auth = new CognitoAuth(CONFIG, { fetch: tokenEndpoint([]).fetcher, storage, now: () => now });
    const logout = new URL(auth.signOut());
    expect(logout.origin + logout.pathname).toBe(`${CONFIG.domain}/logout`);
    expect(logout.searchParams.get("client_id")).toBe("client123");
    expect(logout.searchParams.get("logout_uri")).toBe(CONFIG.logoutUri);
    expect(auth.current()).toBeNull();
    await expect(auth.idToken()).rejects.toBeInstanceOf(SignInRequired);
  });

  it("does not take an ordinary page load for the callback", () => {
    const auth = new CognitoAuth(CONFIG, { fetch: tokenEndpoint([]).fetcher, storage, now: () => now });
    expect(auth.isCallback(new URL("https://console.example.com/#/review"))).toBe(false);
    expect(auth.isCallback(new URL("https://console.example.com/callback"))).toBe(false);
  });
});
