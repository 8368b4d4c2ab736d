/** What changed between two texts, word by word, and how the console shows it. */

export type Segment = { kind: "same" | "removed" | "added"; text: string };

/** Words (letters, digits, `_`), runs of white space, and every other character alone. */
const TOKEN = /\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;

/** Past this many cells (after the common start and end are set aside) the middle is shown as
 * all removed, then all added, rather than compared word by word. Values are at most 2,000
 * characters, so this is never reached by what a person wrote. */
const MAX_CELLS = 4_000_000;

function tokens(text: string): string[] {
  return text.match(TOKEN) ?? [];
}

function push(out: Segment[], kind: Segment["kind"], text: string): void {
  if (text === "") return;
  const last = out[out.length - 1];
  if (last !== undefined && last.kind === kind) last.text += text;
  else out.push({ kind, text });
}

/** The longest common subsequence of `a` and `b`, as segments in order. */
function compare(a: string[], b: string[]): Segment[] {
  const out: Segment[] = [];
  const n = a.length;
  const m = b.length;
  if (n * m > MAX_CELLS) {
    push(out, "removed", a.join(""));
    push(out, "added", b.join(""));
    return out;
  }
  // lengths[i][j]: the LCS of a[i..] and b[j..]
  const width = m + 1;
  const lengths = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lengths[i * width + j] =
        a[i] === b[j]
          ? (lengths[(i + 1) * width + j + 1] as number) + 1
          : Math.max(lengths[(i + 1) * width + j] as number, lengths[i * width + j + 1] as number);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      push(out, "same", a[i] as string);
      i += 1;
      j += 1;
    } else if ((lengths[(i + 1) * width + j] as number) >= (lengths[i * width + j + 1] as number)) {
      push(out, "removed", a[i] as string);
      i += 1;
    } else {
      push(out, "added", b[j] as string);
      j += 1;
    }
  }
  for (; i < n; i += 1) push(out, "removed", a[i] as string);
  for (; j < m; j += 1) push(out, "added", b[j] as string);
  return out;
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

/** What changed from `before` to `after`, word by word: the kept text, and what was removed
 * and added (in that order) where they differ. Joining the `same` and `removed` texts gives
 * `before`; the `same` and `added` texts give `after`. */
export function diffWords(before: string, after: string): Segment[] {
  if (before === after) return before === "" ? [] : [{ kind: "same", text: before }];
  const a = tokens(before);
  const b = tokens(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end += 1;
  const out: Segment[] = [];
  push(out, "same", a.slice(0, start).join(""));
  for (const segment of compare(a.slice(start, a.length - end), b.slice(start, b.length - end))) {
    push(out, segment.kind, segment.text);
  }
  push(out, "same", a.slice(a.length - end).join(""));
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
