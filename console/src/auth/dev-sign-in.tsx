/**
 * The local service's dev sign-in (only in the local build): `engram serve` mints a dev token
 * for the user, team and roles typed here. It exists only there, and only on loopback.
 */
import { useState } from "preact/hooks";

import type { ConsoleConfig } from "../config";
import { expiryOf, type KeyValueStore, SignInRequired, type Tokens, TokenStore } from "./tokens";
import type { Auth, DevSignInModule, DevSignInProps } from "./types";

const SIGN_IN_PATH = "/dev/sign-in";

export interface DevSignInForm {
  user: string;
  team: string;
  admin: boolean;
  teamAdmin: boolean;
}

export class DevAuth implements Auth {
  readonly kind = "dev";
  private readonly tokens: TokenStore;

  constructor(
    private readonly baseUrl: string,
    storage: KeyValueStore,
    private readonly send: typeof fetch = (input, init) => fetch(input, init),
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = new TokenStore(storage);
  }

  async signIn(form: DevSignInForm): Promise<Tokens> {
    const response = await this.send(`${this.baseUrl}${SIGN_IN_PATH}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(form),
    });
    let body: { idToken?: unknown; expiresIn?: unknown; error?: { message?: unknown } } = {};
    try {
      body = (await response.json()) as typeof body;
    } catch {
      body = {};
    }
    if (!response.ok || typeof body.idToken !== "string") {
      const message = typeof body.error?.message === "string" ? body.error.message : `HTTP ${response.status}`;
      throw new Error(`The dev sign-in was refused: ${message}`);
    }
    const expiresIn = typeof body.expiresIn === "number" ? body.expiresIn : undefined;
    const tokens = { idToken: body.idToken, expiresAt: expiryOf(body.idToken, expiresIn, this.now()) };
    this.tokens.write(tokens);
    return tokens;
  }

  current(): Tokens | null {
    return this.tokens.read();
  }

  async idToken(): Promise<string> {
    const tokens = this.tokens.read();
    if (tokens === null) throw new SignInRequired("signed_out");
    if (tokens.expiresAt <= this.now()) {
      this.tokens.clear();
      throw new SignInRequired("expired");
    }
    return tokens.idToken;
  }

  signOut(): null {
    this.tokens.clear();
    return null;
  }
}

/** The roles the signed-in token may carry, each a checkbox. */
const ROLES: { name: "admin" | "teamAdmin"; label: string }[] = [
  { name: "admin", label: "Global admin" },
  { name: "teamAdmin", label: "Team admin" },
];

function Form({ auth, onSignedIn }: DevSignInProps) {
  const [form, setForm] = useState<DevSignInForm>({ user: "", team: "", admin: false, teamAdmin: false });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await (auth as DevAuth).signIn({ ...form, user: form.user.trim(), team: form.team.trim() });
      onSignedIn();
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="dev-sign-in-title">
      <h2 id="dev-sign-in-title">Dev sign-in</h2>
      <p class="muted">
        Local service only: signs you in as any user of any team, with a token the local service signs.
      </p>
      <label>
        User id
        <input
          name="user"
          required
          autoComplete="username"
          value={form.user}
          onInput={(e) => setForm({ ...form, user: e.currentTarget.value })}
        />
      </label>
      <label>
        Team id
        <input
          name="team"
          required
          pattern="[A-Za-z][A-Za-z0-9._\-]{0,127}"
          title="A letter, then letters, digits, dot, underscore or hyphen"
          value={form.team}
          onInput={(e) => setForm({ ...form, team: e.currentTarget.value })}
        />
      </label>
      {ROLES.map(({ name, label }) => (
        <label class="check" key={name}>
          <input
            type="checkbox"
            name={name}
            checked={form[name]}
            onChange={(e) => setForm({ ...form, [name]: e.currentTarget.checked })}
          />
          {label}
        </label>
      ))}
      {error !== null && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <div>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </div>
    </form>
  );
}

export const devSignIn: DevSignInModule | null = {
  createAuth: (config: ConsoleConfig, storage: KeyValueStore) => new DevAuth(config.apiUrl, storage),
  Form,
};
