/** PKCE (RFC 7636) with the S256 method, and the OAuth `state`, from the Web Crypto API. */

const VERIFIER_BYTES = 32; // 43 base64url characters, within RFC 7636's 43-128

export function base64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function randomToken(bytes: number = VERIFIER_BYTES): string {
  const buffer = new Uint8Array(bytes);
  crypto.getRandomValues(buffer);
  return base64Url(buffer);
}

/** A fresh code verifier: random, 43 characters of the unreserved set. */
export function createVerifier(): string {
  return randomToken(VERIFIER_BYTES);
}

/** `BASE64URL(SHA256(ASCII(verifier)))`, the S256 code challenge. */
export async function challengeFor(verifier: string): Promise<string> {
  if (!/^[A-Za-z0-9\-._~]{43,128}$/.test(verifier)) throw new Error("not a PKCE code verifier");
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64Url(new Uint8Array(digest));
}
