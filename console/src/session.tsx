import type { EngramClient } from "@engram/client";
import { createContext } from "preact";
import { useContext } from "preact/hooks";

import type { Identity } from "./auth/types";
import type { ConsoleConfig } from "./config";

export interface Session {
  api: EngramClient;
  identity: Identity;
  config: ConsoleConfig;
  /** Ends this session and shows the sign-in (after a 401 or an expired token). */
  signInAgain: () => void;
  signOut: () => void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (session === null) throw new Error("useSession outside a signed-in page");
  return session;
}
