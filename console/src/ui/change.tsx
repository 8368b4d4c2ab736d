/** How the review queue shows a change proposal: a new value for a memory that is active. */

import type { components } from "@engram/client";

import { DiffText } from "./diff";

/** What a change would replace (`current` of a review item): `value` is null when the
 * reviewer may not read it. */
export type Current = components["schemas"]["CurrentOut"];

/** What stands for a current value the reviewer may not read (a user's own memory). */
export const WITHHELD = "(the user's own value — not shown)";

/**
 * The memory's value now (with its version) beside the proposed one, then what changes from
 * one to the other word by word (`DiffText`). A withheld current value is said in words, and
 * then there is nothing to compare the proposal with.
 */
export function ChangeText({ current, proposed }: { current: Current; proposed: string }) {
  const now = current.value ?? null;
  return (
    <dl class="change-text">
      <div>
        <dt>Current (version {current.version})</dt>
        <dd>{now === null ? <span class="withheld">{WITHHELD}</span> : now}</dd>
      </div>
      <div>
        <dt>Proposed</dt>
        <dd>{proposed}</dd>
      </div>
      {now !== null && (
        <div>
          <dt>What changes</dt>
          <dd>
            <DiffText before={now} after={proposed} />
          </dd>
        </div>
      )}
    </dl>
  );
}
