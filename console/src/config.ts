/** The console's runtime settings, read from `/config.json` when the page starts. */

export interface DevAuthConfig {
  mode: "dev";
}

export interface CognitoAuthConfig {
  mode: "cognito";
  /** The hosted UI, e.g. `https://<prefix>.auth.<region>.amazoncognito.com` (no trailing `/`). */
  domain: string;
  clientId: string;
  redirectUri: string;
  logoutUri: string;
  scopes: string[];
}

export interface ConsoleConfig {
  /** The API's origin; `""` means the console's own origin (the API is served beside it). */
  apiUrl: string;
  auth: DevAuthConfig | CognitoAuthConfig;
  /** The group names of the admin roles (defaults: the service's defaults). */
  adminGroup: string;
  teamAdminGroup: string;
  /** The claim that carries the team (default `custom:team`). */
  teamClaim: string;
  groupsClaim: string;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

function text(value: unknown, field: string, { allowEmpty = false } = {}): string {
  if (typeof value !== "string" || (!allowEmpty && value.trim() === "")) {
    throw new ConfigError(`config.json: ${field} must be a non-empty string`);
  }
  return value;
}

function optionalText(value: unknown, field: string, fallback: string): string {
  return value === undefined ? fallback : text(value, field);
}

function httpsUrl(value: unknown, field: string): string {
  const raw = text(value, field);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`config.json: ${field} is not a URL`);
  }
  const loopback = url.hostname === "localhost" || url.hostname === "127.0.0.1";
  if (url.protocol !== "https:" && !(loopback && url.protocol === "http:")) {
    throw new ConfigError(`config.json: ${field} must be an https URL`);
  }
  return raw;
}

/** The settings in `raw` (the parsed `config.json`), checked field by field. */
export function parseConfig(raw: unknown): ConsoleConfig {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new ConfigError("config.json must be a JSON object");
  }
  const body = raw as Record<string, unknown>;
  const apiUrl = text(body.apiUrl ?? "", "apiUrl", { allowEmpty: true }).replace(/\/+$/, "");
  if (apiUrl !== "") httpsUrl(apiUrl, "apiUrl");
  const auth = body.auth as Record<string, unknown> | undefined;
  if (auth === null || typeof auth !== "object") throw new ConfigError("config.json: auth is missing");
  let parsed: ConsoleConfig["auth"];
  if (auth.mode === "dev") {
    parsed = { mode: "dev" };
  } else if (auth.mode === "cognito") {
    const scopes = auth.scopes ?? ["openid", "email", "profile"];
    if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === "string" && s !== "")) {
      throw new ConfigError("config.json: auth.scopes must be a list of strings");
    }
    if (!scopes.includes("openid")) throw new ConfigError("config.json: auth.scopes must include openid");
    parsed = {
      mode: "cognito",
      domain: httpsUrl(auth.domain, "auth.domain").replace(/\/+$/, ""),
      clientId: text(auth.clientId, "auth.clientId"),
      redirectUri: httpsUrl(auth.redirectUri, "auth.redirectUri"),
      logoutUri: httpsUrl(auth.logoutUri, "auth.logoutUri"),
      scopes: scopes as string[],
    };
  } else {
    throw new ConfigError('config.json: auth.mode must be "dev" or "cognito"');
  }
  return {
    apiUrl,
    auth: parsed,
    adminGroup: optionalText(body.adminGroup, "adminGroup", "engram-admins"),
    teamAdminGroup: optionalText(body.teamAdminGroup, "teamAdminGroup", "engram-team-admins"),
    teamClaim: optionalText(body.teamClaim, "teamClaim", "custom:team"),
    groupsClaim: optionalText(body.groupsClaim, "groupsClaim", "cognito:groups"),
  };
}

export async function loadConfig(fetcher: typeof fetch = fetch): Promise<ConsoleConfig> {
  const response = await fetcher("/config.json", { cache: "no-store" });
  if (!response.ok) throw new ConfigError(`config.json could not be read (HTTP ${response.status})`);
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    throw new ConfigError("config.json is not JSON");
  }
  return parseConfig(body);
}
