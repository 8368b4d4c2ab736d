import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { devSignIn } from "virtual:dev-sign-in";

import { createApi } from "./api";
import { CognitoAuth, REFRESH_MARGIN_MS, SignInError } from "./auth/cognito";
import type { Auth, Identity } from "./auth/types";
import { identityOf } from "./auth/types";
import { type ConsoleConfig, loadConfig } from "./config";
import { MyMemory } from "./pages/my-memory";
import { Review } from "./pages/review";
import { Settings } from "./pages/settings";
import { type Route, useRoute } from "./router";
import { type Session, SessionContext } from "./session";
import { HealthBanner } from "./ui/health";

type Boot =
  | { state: "starting" }
  | { state: "failed"; message: string }
  | { state: "ready"; config: ConsoleConfig; auth: Auth };

function createAuth(config: ConsoleConfig): Auth {
  if (config.auth.mode === "cognito") {
    const cognito = new CognitoAuth(config.auth, { fetch: (i, init) => fetch(i, init), storage: sessionStorage });
    return {
      kind: "cognito",
      current: () => cognito.current(),
      idToken: () => cognito.idToken(),
      signOut: () => cognito.signOut(),
      cognito,
    } as Auth & { cognito: CognitoAuth };
  }
  if (devSignIn === null) {
    throw new Error('This build signs in with Cognito only, but config.json says auth.mode "dev".');
  }
  return devSignIn.createAuth(config, sessionStorage);
}

function cognitoOf(auth: Auth): CognitoAuth | null {
  return (auth as Auth & { cognito?: CognitoAuth }).cognito ?? null;
}

export function App() {
  const [boot, setBoot] = useState<Boot>({ state: "starting" });
  const [signInNotice, setSignInNotice] = useState<string | null>(null);
  const [tokenVersion, setTokenVersion] = useState(0);

  useEffect(() => {
    (async () => {
      const config = await loadConfig();
      const auth = createAuth(config);
      const cognito = cognitoOf(auth);
      const here = new URL(window.location.href);
      if (cognito !== null && cognito.isCallback(here)) {
        try {
          const returnTo = await cognito.completeSignIn(here);
          window.history.replaceState(null, "", `/${returnTo.startsWith("#") ? returnTo : "#/"}`);
        } catch (error) {
          window.history.replaceState(null, "", "/");
          setSignInNotice(error instanceof SignInError ? error.message : String(error));
        }
      }
      setBoot({ state: "ready", config, auth });
    })().catch((error: unknown) => {
      setBoot({ state: "failed", message: error instanceof Error ? error.message : String(error) });
    });
  }, []);

  if (boot.state === "starting") {
    return (
      <main id="main" class="centered">
        <p role="status">Starting the Engram console…</p>
      </main>
    );
  }
  if (boot.state === "failed") {
    return (
      <main id="main" class="centered">
        <h1>The console could not start</h1>
        <p role="alert" class="notice error">
          {boot.message}
        </p>
        <button type="button" onClick={() => window.location.reload()}>
          Reload
        </button>
      </main>
    );
  }
  const { config, auth } = boot;
  const tokens = auth.current();
  const usable = tokens !== null && (tokens.expiresAt > Date.now() || tokens.refreshToken !== undefined);
  const identity = usable ? identityOf(tokens.idToken, config) : null;
  const endSession = (notice: string | null) => {
    const next = auth.signOut();
    if (next !== null && notice === null) {
      window.location.assign(next);
      return;
    }
    setSignInNotice(notice);
    setTokenVersion((v) => v + 1);
  };
  if (identity === null) {
    return (
      <SignIn
        auth={auth}
        notice={signInNotice}
        onSignedIn={() => {
          setSignInNotice(null);
          setTokenVersion((v) => v + 1);
        }}
      />
    );
  }
  return (
    <Shell
      key={`${identity.userId}/${identity.teamId}/${tokenVersion}`}
      config={config}
      auth={auth}
      identity={identity}
      onSignedOut={endSession}
    />
  );
}

function SignIn({ auth, notice, onSignedIn }: { auth: Auth; notice: string | null; onSignedIn: () => void }) {
  const cognito = cognitoOf(auth);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    document.title = "Sign in · Engram console";
  }, []);
  return (
    <>
      <header class="topbar">
        <span class="brand">Engram</span>
      </header>
      <main id="main" class="centered stack">
        <h1>Sign in to Engram</h1>
        <p>See and manage what Engram remembers about you.</p>
        {notice !== null && (
          <p role="alert" class="notice error">
            {notice}
          </p>
        )}
        {cognito !== null ? (
          <div>
            <button
              type="button"
              class="primary"
              disabled={busy}
              onClick={async () => {
                setBusy(true);
                window.location.assign(await cognito.authorizeUrl(window.location.hash || "#/"));
              }}
            >
              Sign in
            </button>
          </div>
        ) : (
          devSignIn !== null && <devSignIn.Form auth={auth} onSignedIn={onSignedIn} />
        )}
      </main>
    </>
  );
}

const PAGES: { route: Route; label: string; admin: boolean }[] = [
  { route: "memory", label: "My memory", admin: false },
  { route: "review", label: "Review", admin: true },
  { route: "settings", label: "Settings", admin: true },
];

function Shell({ config, auth, identity, onSignedOut }: {
  config: ConsoleConfig;
  auth: Auth;
  identity: Identity;
  onSignedOut: (notice: string | null) => void;
}) {
  const route = useRoute();
  const session = useMemo<Session>(() => {
    const api = createApi(config, auth, () => onSignedOut("Your sign-in has expired or was not accepted. Sign in again."));
    return {
      api,
      identity,
      config,
      signInAgain: () => onSignedOut("Sign in again to go on."),
      signOut: () => onSignedOut(null),
    };
  }, [config, auth, identity]);
  useEffect(() => {
    // Cognito: refresh the ID token shortly before it expires, even while the page is idle
    const cognito = cognitoOf(auth);
    if (cognito === null) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let live = true;
    const schedule = () => {
      const tokens = auth.current();
      if (!live || tokens?.refreshToken === undefined) return;
      const due = Math.max(1000, tokens.expiresAt - REFRESH_MARGIN_MS - Date.now());
      timer = setTimeout(() => {
        // a refused refresh leaves no tokens: the next call asks to sign in again
        cognito.refresh().then(schedule, () => undefined);
      }, due);
    };
    schedule();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [auth, identity]);
  const first = useRef(true);
  useEffect(() => {
    // a new page: keyboard and screen-reader users start at its content, not at the top bar
    if (first.current) {
      first.current = false;
      return;
    }
    document.getElementById("main")?.focus();
  }, [route]);
  const pages = PAGES.filter((page) => !page.admin || identity.canAdminister);
  const allowed = pages.some((page) => page.route === route);
  const roles = [identity.isAdmin && "admin", identity.isTeamAdmin && "team admin"].filter(Boolean).join(", ");

  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#main" onClick={(e) => {
        e.preventDefault();
        document.getElementById("main")?.focus();
      }}>
        Skip to content
      </a>
      <header class="topbar">
        <span class="brand">Engram</span>
        <nav aria-label="Pages">
          <ul>
            {pages.map((page) => (
              <li key={page.route}>
                <a href={`#/${page.route === "memory" ? "" : page.route}`} aria-current={route === page.route ? "page" : undefined}>
                  {page.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>
            Signed in as <strong>{identity.userId}</strong> ({identity.teamId}
            {roles ? `, ${roles}` : ""})
          </span>
          <button type="button" onClick={() => session.signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <HealthBanner />
      <main id="main" tabIndex={-1}>
        {route === "memory" && <MyMemory />}
        {route === "review" && allowed && <Review />}
        {route === "settings" && allowed && <Settings />}
        {!allowed && <NotHere route={route} />}
      </main>
    </SessionContext.Provider>
  );
}

function NotHere({ route }: { route: Route }) {
  useEffect(() => {
    document.title = "Not available · Engram console";
  }, []);
  return (
    <section class="stack">
      <h1>Page not available</h1>
      <p>
        {route === "unknown"
          ? "There is no such page."
          : "This page is for admins and team admins. Your account does not have that role."}
      </p>
      <p>
        <a href="#/">Go to My memory</a>
      </p>
    </section>
  );
}
