/** Reading (not verifying) a JWT's claims: the API verifies every token; the console only
 * reads who is signed in and when the token expires. */

export type Claims = Record<string, unknown>;

function base64UrlDecode(part: string): string {
  const padded = part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "=");
  const binary = atob(padded);
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** The payload of `token`; throws on anything that is not a three-part JWT with a JSON object. */
export function decodeClaims(token: string): Claims {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts[1]) throw new Error("not a JWT");
  const payload: unknown = JSON.parse(base64UrlDecode(parts[1]));
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) throw new Error("not a JWT");
  return payload as Claims;
}

/** Groups as Cognito sends them (a list) or as a gateway flattens them (`"[a b]"`, or one name). */
export function groupsOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((g): g is string => typeof g === "string");
  if (typeof value !== "string" || value === "") return [];
  if (value.startsWith("[") && value.endsWith("]")) return value.slice(1, -1).split(" ").filter(Boolean);
  return [value];
}

/** When the token expires, in epoch ms (`exp`), or `null` when it has none. */
export function expiresAtOf(claims: Claims): number | null {
  return typeof claims.exp === "number" ? claims.exp * 1000 : null;
}
