/**
 * Cognito's hosted UI with the authorization-code flow and PKCE (S256): the console sends the
 * person to `<domain>/oauth2/authorize`, checks the `state` it gets back on `/callback`,
 * exchanges the code at `<domain>/oauth2/token` with its code verifier, and refreshes the ID
 * token with the refresh token before it expires. Sign-out ends the hosted UI's session too.
 */
import type { CognitoAuthConfig } from "../config";
import { challengeFor, createVerifier, randomToken } from "./pkce";
import { expiryOf, type KeyValueStore, SignInRequired, type Tokens, TokenStore } from "./tokens";

/** A token is refreshed when it has less than this left. */
export const REFRESH_MARGIN_MS = 2 * 60 * 1000;

const PENDING_KEY = "engram.console.pkce";

interface PendingSignIn {
  state: string;
  verifier: string;
  /** Where to go back to after signing in (the page's hash route). */
  returnTo: string;
}

interface TokenAnswer {
  id_token?: unknown;
  access_token?: unknown;
  refresh_token?: unknown;
  expires_in?: unknown;
  error?: unknown;
}

export class SignInError extends Error {
  override name = "SignInError";
}

export interface CognitoDeps {
  fetch: typeof fetch;
  /** Where the tokens and the pending sign-in are kept (the tab's sessionStorage). */
  storage: KeyValueStore;
  now?: () => number;
}

export class CognitoAuth {
  private readonly tokens: TokenStore;
  private readonly now: () => number;
  private refreshing: Promise<Tokens> | null = null;

  constructor(
    readonly config: CognitoAuthConfig,
    private readonly deps: CognitoDeps,
  ) {
    this.tokens = new TokenStore(deps.storage);
    this.now = deps.now ?? Date.now;
  }

  /** The hosted UI's sign-in URL; remembers the state and the verifier for the callback. */
  async authorizeUrl(returnTo = "#/"): Promise<string> {
    const pending: PendingSignIn = { state: randomToken(), verifier: createVerifier(), returnTo };
    this.deps.storage.setItem(PENDING_KEY, JSON.stringify(pending));
    const url = new URL(`${this.config.domain}/oauth2/authorize`);
    url.search = new URLSearchParams({
      response_type: "code",
      client_id: this.config.clientId,
      redirect_uri: this.config.redirectUri,
      scope: this.config.scopes.join(" "),
      state: pending.state,
      code_challenge: await challengeFor(pending.verifier),
      code_challenge_method: "S256",
    }).toString();
    return url.toString();
  }

  /** Whether `url` is the redirect back from the hosted UI (its path and a code or an error). */
  isCallback(url: URL): boolean {
    const expected = new URL(this.config.redirectUri);
    return (
      url.pathname.replace(/\/+$/, "") === expected.pathname.replace(/\/+$/, "") &&
      (url.searchParams.has("code") || url.searchParams.has("error"))
    );
  }

  /**
   * The callback: the `state` must be the one this tab sent (else the answer is not for us),
   * then the code is exchanged with the verifier. The pending sign-in is used up either way.
   * Returns where to go back to.
   */
  async completeSignIn(url: URL): Promise<string> {
    const raw = this.deps.storage.getItem(PENDING_KEY);
    this.deps.storage.removeItem(PENDING_KEY);
    const error = url.searchParams.get("error");
    if (error !== null) {
      const description = url.searchParams.get("error_description");
      throw new SignInError(`Sign-in was not completed: ${description ?? error}`);
    }
    let pending: PendingSignIn | null = null;
    try {
      pending = raw === null ? null : (JSON.parse(raw) as PendingSignIn);
    } catch {
      pending = null;
    }
    const state = url.searchParams.get("state");
    if (pending === null || typeof pending.state !== "string" || state !== pending.state) {
      throw new SignInError("This sign-in answer was not started from this tab (its state does not match). Sign in again.");
    }
    const code = url.searchParams.get("code");
    if (!code) throw new SignInError("The sign-in answer had no code. Sign in again.");
    const answer = await this.tokenRequest({
      grant_type: "authorization_code",
      client_id: this.config.clientId,
      code,
      redirect_uri: this.config.redirectUri,
      code_verifier: pending.verifier,
    });
    this.tokens.write(this.tokensFrom(answer, undefined));
    return pending.returnTo || "#/";
  }

  current(): Tokens | null {
    return this.tokens.read();
  }

  /** The ID token to send: refreshed first when it is about to expire. */
  async idToken(): Promise<string> {
    const tokens = this.tokens.read();
    if (tokens === null) throw new SignInRequired("signed_out");
    if (tokens.expiresAt - this.now() > REFRESH_MARGIN_MS) return tokens.idToken;
    return (await this.refresh()).idToken;
  }

  /** New tokens from the refresh token (one request however many callers wait for it). */
  refresh(): Promise<Tokens> {
    if (this.refreshing === null) {
      this.refreshing = this.doRefresh().finally(() => {
        this.refreshing = null;
      });
    }
    return this.refreshing;
  }

  private async doRefresh(): Promise<Tokens> {
    const tokens = this.tokens.read();
    if (tokens?.refreshToken === undefined) {
      this.tokens.clear();
      throw new SignInRequired("expired");
    }
    let answer: TokenAnswer;
    try {
      answer = await this.tokenRequest({
        grant_type: "refresh_token",
        client_id: this.config.clientId,
        refresh_token: tokens.refreshToken,
      });
    } catch (error) {
      if (error instanceof SignInError) {
        this.tokens.clear();
        throw new SignInRequired("expired");
      }
      throw error;
    }
    const next = this.tokensFrom(answer, tokens.refreshToken);
    this.tokens.write(next);
    return next;
  }

  /** Forgets the tokens here and returns the hosted UI's logout URL (which ends its session). */
  signOut(): string {
    this.tokens.clear();
    const url = new URL(`${this.config.domain}/logout`);
    url.search = new URLSearchParams({
      client_id: this.config.clientId,
      logout_uri: this.config.logoutUri,
    }).toString();
    return url.toString();
  }

  private async tokenRequest(form: Record<string, string>): Promise<TokenAnswer> {
    const response = await this.deps.fetch(`${this.config.domain}/oauth2/token`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
    let answer: TokenAnswer;
    try {
      answer = (await response.json()) as TokenAnswer;
    } catch {
      answer = {};
    }
    if (!response.ok) {
      const code = typeof answer.error === "string" ? answer.error : `HTTP ${response.status}`;
      throw new SignInError(`The sign-in service refused the token request (${code}).`);
    }
    return answer;
  }

  private tokensFrom(answer: TokenAnswer, previousRefresh: string | undefined): Tokens {
    if (typeof answer.id_token !== "string" || answer.id_token === "") {
      throw new SignInError("The sign-in service answered without an ID token.");
    }
    const expiresIn = typeof answer.expires_in === "number" ? answer.expires_in : undefined;
    const refreshToken = typeof answer.refresh_token === "string" ? answer.refresh_token : previousRefresh;
    return {
      idToken: answer.id_token,
      expiresAt: expiryOf(answer.id_token, expiresIn, this.now()),
      ...(refreshToken !== undefined ? { refreshToken } : {}),
    };
  }
}
