/** The AWS build signs in through Cognito only: it has no dev sign-in. */
import type { DevSignInModule } from "./types";

export const devSignIn: DevSignInModule | null = null;
