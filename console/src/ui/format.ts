const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function when(ms: number | null | undefined): string {
  return ms === null || ms === undefined ? "never" : DATE.format(new Date(ms));
}

export function percent(fraction: number): string {
  return `${Math.round(Math.max(0, Math.min(1, fraction)) * 100)}%`;
}

export const SCOPE_LABELS: Record<string, string> = {
  user: "Only you",
  persona: "Shared by a persona",
  persona_user: "You, with one persona",
};

export const STATUS_LABELS: Record<string, string> = {
  active: "Active",
  pending_review: "Waiting for review",
  archived: "Archived",
  rejected: "Rejected",
};

export const CATEGORY_LABELS: Record<string, string> = {
  tool_affinity: "Tool that works for you",
  tool_avoidance: "Tool that fails for you",
  entity_frequency: "Something you use often",
  domain_preference: "Topic you ask about",
  failure_pattern: "Recurring failure",
};

export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}
