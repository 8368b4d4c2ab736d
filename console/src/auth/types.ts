import type { ComponentType } from "preact";

import type { ConsoleConfig } from "../config";
import { decodeClaims, groupsOf } from "./jwt";
import type { KeyValueStore, Tokens } from "./tokens";

/** How the console gets and keeps its token: Cognito's hosted UI, or the local dev sign-in. */
export interface Auth {
  readonly kind: "dev" | "cognito";
  current(): Tokens | null;
  /** The ID token to send now; throws `SignInRequired` when there is none left. */
  idToken(): Promise<string>;
  /** Forgets the tokens; returns a page to go to (the hosted UI's logout), or null. */
  signOut(): string | null;
}

/** Who is signed in, as the token's claims say (the API checks the same claims itself). */
export interface Identity {
  userId: string;
  teamId: string;
  groups: string[];
  isAdmin: boolean;
  isTeamAdmin: boolean;
  /** May open the review queue and the settings (a global admin or a team admin). */
  canAdminister: boolean;
}

export function identityOf(idToken: string, config: ConsoleConfig): Identity | null {
  try {
    const claims = decodeClaims(idToken);
    const userId = typeof claims.sub === "string" ? claims.sub : "";
    const teamId = typeof claims[config.teamClaim] === "string" ? (claims[config.teamClaim] as string) : "";
    const groups = groupsOf(claims[config.groupsClaim]);
    const isAdmin = groups.includes(config.adminGroup);
    const isTeamAdmin = groups.includes(config.teamAdminGroup);
    return { userId, teamId, groups, isAdmin, isTeamAdmin, canAdminister: isAdmin || isTeamAdmin };
  } catch {
    return null;
  }
}

export interface DevSignInProps {
  auth: Auth;
  onSignedIn: () => void;
}

/** The local build's dev sign-in; the AWS build has none (`null`). */
export interface DevSignInModule {
  createAuth(config: ConsoleConfig, storage: KeyValueStore): Auth;
  Form: ComponentType<DevSignInProps>;
}
