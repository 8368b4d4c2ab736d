/** The signed-in session's tokens, kept in the tab's sessionStorage (gone when the tab closes). */
import { decodeClaims, expiresAtOf } from "./jwt";

export interface Tokens {
  /** The ID token: what the console sends as `Authorization: Bearer` (it carries the team). */
  idToken: string;
  /** Epoch ms after which the ID token is no longer accepted. */
  expiresAt: number;
  refreshToken?: string;
}

export interface KeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

const KEY = "engram.console.tokens";

/** The expiry of `idToken`: its `exp` claim, else `expiresIn` seconds from `now`. */
export function expiryOf(idToken: string, expiresInS: number | undefined, now: number): number {
  let fromClaims: number | null = null;
  try {
    fromClaims = expiresAtOf(decodeClaims(idToken));
  } catch {
    fromClaims = null;
  }
  if (fromClaims !== null) return fromClaims;
  return now + (expiresInS ?? 3600) * 1000;
}

export class TokenStore {
  constructor(private readonly storage: KeyValueStore) {}

  read(): Tokens | null {
    const raw = this.storage.getItem(KEY);
    if (raw === null) return null;
    try {
      const value = JSON.parse(raw) as Partial<Tokens>;
      if (typeof value.idToken !== "string" || typeof value.expiresAt !== "number") return null;
      return {
        idToken: value.idToken,
        expiresAt: value.expiresAt,
        ...(typeof value.refreshToken === "string" ? { refreshToken: value.refreshToken } : {}),
      };
    } catch {
      return null;
    }
  }

  write(tokens: Tokens): void {
    this.storage.setItem(KEY, JSON.stringify(tokens));
  }

  clear(): void {
    this.storage.removeItem(KEY);
  }
}

/** Thrown when there is no usable token: the person has to sign in (again). */
export class SignInRequired extends Error {
  override name = "SignInRequired";
  constructor(readonly reason: "signed_out" | "expired" | "refused") {
    super(
      reason === "signed_out"
        ? "You are signed out."
        : reason === "expired"
          ? "Your sign-in has expired. Sign in again."
          : "Engram did not accept your sign-in. Sign in again.",
    );
  }
}
