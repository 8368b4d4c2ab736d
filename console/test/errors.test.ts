import { EngramApiError, EngramTransportError } from "@engram/client";
import { describe, expect, it } from "vitest";

import { describeError } from "../src/api";
import { decodeClaims, groupsOf } from "../src/auth/jwt";
import { SignInRequired } from "../src/auth/tokens";
import { identityOf } from "../src/auth/types";
import { parseConfig } from "../src/config";

const api = (status: number, code: EngramApiError["code"], retryAfterS: number | null = null) =>
  new EngramApiError({ status, code, message: `m ${code}`, retryAfterS });

describe("what a person is told", () => {
  it("says how long to wait after a 429", () => {
    const info = describeError(api(429, "rate_limited", 7));
    expect(info.detail).toContain("Wait 7 seconds");
    expect(info.retryAfterS).toBe(7);
  });

  it("asks to sign in again after a 401 or an expired session", () => {
    expect(describeError(api(401, "unauthorized")).signIn).toBe(true);
    expect(describeError(new SignInRequired("expired")).signIn).toBe(true);
  });

  it("calls a concurrent change a conflict (409 and 412)", () => {
    expect(describeError(api(409, "conflict"))).toMatchObject({ conflict: true, title: expect.stringMatching(/^Conflict/) });
    expect(describeError(api(412, "precondition_failed"))).toMatchObject({ conflict: true });
  });

  it("explains a 503 as degraded, and an unreachable service", () => {
    expect(describeError(api(503, "unavailable")).title).toBe("Engram is degraded");
    expect(describeError(new EngramTransportError("x", { cause: null, attempts: 3 })).title).toMatch(/cannot be reached/);
  });
});

describe("who is signed in", () => {
  const token = (claims: Record<string, unknown>) =>
    `e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`;
  const config = parseConfig({ apiUrl: "", auth: { mode: "dev" } });

  it("reads the team and roles from the ID token's claims", () => {
    const who = identityOf(token({ sub: "alice", "custom:team": "acme", "cognito:groups": ["engram-team-admins"] }), config);
    expect(who).toMatchObject({ userId: "alice", teamId: "acme", isAdmin: false, isTeamAdmin: true, canAdminister: true });
    const plain = identityOf(token({ sub: "bob", "custom:team": "acme" }), config);
    expect(plain?.canAdminister).toBe(false);
  });

  it("reads groups in the shapes a gateway passes them", () => {
    expect(groupsOf("[a b]")).toEqual(["a", "b"]);
    expect(groupsOf("a")).toEqual(["a"]);
    expect(groupsOf(["a", 3])).toEqual(["a"]);
    expect(groupsOf(undefined)).toEqual([]);
  });

  it("decodes non-ASCII claims", () => {
    expect(decodeClaims(token({ sub: "zoë" })).sub).toBe("zoë");
    expect(() => decodeClaims("not-a-jwt")).toThrow();
  });
});
