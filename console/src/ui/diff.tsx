/** What changed between two texts, word by word, and how the console shows it. */

import { diffWordsWithSpace } from "diff";

export type Segment = { kind: "same" | "removed" | "added"; text: string };

function push(out: Segment[], kind: Segment["kind"], text: string): void {
  if (text === "") return;
  const last = out[out.length - 1];
  if (last !== undefined && last.kind === kind) last.text += text;
  else out.push({ kind, text });
}

/** Each run of changes as one removal then one addition; white space alone between two
 * changes is part of them (“a b” → “x y” is one change, not two around a kept space). */
function tidy(segments: Segment[]): Segment[] {
  const out: Segment[] = [];
  let removed = "";
  let added = "";
  const flush = () => {
    push(out, "removed", removed);
    push(out, "added", added);
    removed = "";
    added = "";
  };
  segments.forEach((segment, index) => {
    if (segment.kind === "removed") removed += segment.text;
    else if (segment.kind === "added") added += segment.text;
    else {
      const next = segments[index + 1];
      const between = (removed !== "" || added !== "") && next !== undefined && /^\s+$/.test(segment.text);
      if (between) {
        removed += segment.text;
        added += segment.text;
      } else {
        flush();
        push(out, "same", segment.text);
      }
    }
  });
  flush();
  return out;
}

/** What changed from `before` to `after`, word by word (jsdiff's `diffWordsWithSpace`): the
 * kept text, and what was removed and added (in that order) where they differ. Joining the
 * `same` and `removed` texts gives `before`; the `same` and `added` texts give `after`. */
export function diffWords(before: string, after: string): Segment[] {
  if (before === after) return before === "" ? [] : [{ kind: "same", text: before }];
  const out: Segment[] = [];
  for (const change of diffWordsWithSpace(before, after)) {
    push(out, change.removed ? "removed" : change.added ? "added" : "same", change.value);
  }
  return tidy(out);
}

/**
 * `before` → `after` as one line: removed text struck through (`<del>`), added text
 * underlined and highlighted (`<ins>`), and, for screen readers and whoever cannot tell the
 * marks apart, the words “removed:” and “added:” around each (visually hidden), so colour is
 * never all that says it.
 */
export function DiffText({ before, after }: { before: string; after: string }) {
  return (
    <span class="diff">
      {diffWords(before, after).map((segment, index) =>
        segment.kind === "same" ? (
          <span key={index}>{segment.text}</span>
        ) : segment.kind === "removed" ? (
          <del key={index}>
            <span class="visually-hidden">[removed: </span>
            {segment.text}
            <span class="visually-hidden">]</span>
          </del>
        ) : (
          <ins key={index}>
            <span class="visually-hidden">[added: </span>
            {segment.text}
            <span class="visually-hidden">]</span>
          </ins>
        ),
      )}
    </span>
  );
}
