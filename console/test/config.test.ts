import { describe, expect, it } from "vitest";

import { ConfigError, parseConfig } from "../src/config";

describe("config.json", () => {
  it("reads the local config", () => {
    const config = parseConfig({ apiUrl: "", auth: { mode: "dev" } });
    expect(config.apiUrl).toBe("");
    expect(config.auth).toEqual({ mode: "dev" });
    expect(config.teamClaim).toBe("custom:team");
    expect(config.adminGroup).toBe("engram-admins");
  });

  it("reads the Cognito config", () => {
    const config = parseConfig({
      apiUrl: "",
      auth: {
        mode: "cognito",
        domain: "https://p.auth.eu-west-1.amazoncognito.com/",
        clientId: "abc",
        redirectUri: "https://c.example.com/callback",
        logoutUri: "https://c.example.com/",
        scopes: ["openid", "email", "profile"],
      },
    });
    expect(config.auth.mode).toBe("cognito");
    if (config.auth.mode === "cognito") expect(config.auth.domain).toBe("https://p.auth.eu-west-1.amazoncognito.com");
  });

  it.each([
    [null, /JSON object/],
    [{ apiUrl: "", auth: { mode: "magic" } }, /auth.mode/],
    [{ apiUrl: "ftp://x", auth: { mode: "dev" } }, /apiUrl/],
    [{ auth: { mode: "cognito", domain: "http://evil.example.com", clientId: "a", redirectUri: "https://c/cb", logoutUri: "https://c/" } }, /auth.domain/],
    [{ auth: { mode: "cognito", domain: "https://d.example.com", clientId: "", redirectUri: "https://c/cb", logoutUri: "https://c/" } }, /auth.clientId/],
    [{ auth: { mode: "cognito", domain: "https://d.example.com", clientId: "a", redirectUri: "https://c/cb", logoutUri: "https://c/", scopes: ["email"] } }, /openid/],
  ])("refuses %j naming the field", (raw, message) => {
    expect(() => parseConfig(raw)).toThrow(ConfigError);
    expect(() => parseConfig(raw)).toThrow(message);
  });
});
