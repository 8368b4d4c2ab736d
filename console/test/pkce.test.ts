import { createHash } from "node:crypto";

import { describe, expect, it } from "vitest";

import { base64Url, challengeFor, createVerifier } from "../src/auth/pkce";

describe("PKCE", () => {
  it("computes RFC 7636's S256 challenge of its example verifier", async () => {
    // RFC 7636, appendix B
    expect(await challengeFor("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")).toBe(
      "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    );
  });

  it("makes fresh 43-character verifiers of the unreserved set", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const verifier = createVerifier();
      expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
      seen.add(verifier);
      const expected = createHash("sha256").update(verifier).digest("base64url");
      expect(await challengeFor(verifier)).toBe(expected);
    }
    expect(seen.size).toBe(50);
  });

  it("refuses a verifier outside RFC 7636's rule", async () => {
    await expect(challengeFor("short")).rejects.toThrow(/verifier/);
    await expect(challengeFor("a".repeat(42) + "+")).rejects.toThrow(/verifier/);
  });

  it("encodes base64url without padding", () => {
    expect(base64Url(new Uint8Array([0xfb, 0xff]))).toBe("-_8");
  });
});
