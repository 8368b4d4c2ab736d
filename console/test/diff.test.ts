import { type ComponentChildren, isValidElement, type VNode } from "preact";
import { describe, expect, it } from "vitest";

import { ChangeText, WITHHELD } from "../src/ui/change";
import { DiffText, diffWords, type Segment } from "../src/ui/diff";
import { surfaceLabel } from "../src/ui/history";

/** `before` and `after` again from the segments: the kept and removed texts, the kept and
 * added ones. */
function sides(segments: Segment[]): [string, string] {
  const pick = (kind: Segment["kind"]) =>
    segments
      .filter((s) => s.kind === "same" || s.kind === kind)
      .map((s) => s.text)
      .join("");
  return [pick("removed"), pick("added")];
}

/** A rendered tree, flattened to text: with `hidden`, also what only screen readers get;
 * `mark` wraps what each element of these names holds. */
function text(node: ComponentChildren, options: { hidden: boolean; mark?: Record<string, [string, string]> }): string {
  if (node === null || node === undefined || typeof node === "boolean") return "";
  if (typeof node === "string" || typeof node === "number" || typeof node === "bigint") return String(node);
  if (Array.isArray(node)) return node.map((child) => text(child, options)).join("");
  if (!isValidElement(node)) return "";
  const vnode = node as VNode<{ children?: ComponentChildren; class?: string }>;
  if (typeof vnode.type === "function") {
    return text((vnode.type as (props: unknown) => ComponentChildren)(vnode.props), options);
  }
  if (!options.hidden && vnode.props.class === "visually-hidden") return "";
  const inner = text(vnode.props.children, options);
  const [open, close] = options.mark?.[vnode.type as string] ?? ["", ""];
  return `${open}${inner}${close}`;
}

const render = (before: string, after: string) => DiffText({ before, after });

describe("what changed between two versions", () => {
  it("keeps what is the same and names the words removed and added", () => {
    const segments = diffWords("quarterly royalty statement, PDF", "quarterly sales statement, PDF");
    expect(segments).toEqual([
      { kind: "same", text: "quarterly " },
      { kind: "removed", text: "royalty" },
      { kind: "added", text: "sales" },
      { kind: "same", text: " statement, PDF" },
    ]);
  });

  it("gives back both texts, whatever changed", () => {
    const cases: [string, string][] = [
      ["", "Europe/Paris"],
      ["Europe/Paris", ""],
      ["Europe/Paris", "Europe/Lisbon"],
      ["a b c d e", "a x c y e"],
      ["the cat sat on the mat", "the dog sat, then slept, on a mat!"],
      ["line one\nline two", "line one\nline 2\nline three"],
      ["café au lait", "café crème"],
      ["same", "same"],
    ];
    for (const [before, after] of cases) {
      expect(sides(diffWords(before, after)), `${before} → ${after}`).toEqual([before, after]);
    }
  });

  it("says one change for neighbouring words, not one per word", () => {
    expect(diffWords("meet on monday morning", "meet on friday evening")).toEqual([
      { kind: "same", text: "meet on " },
      { kind: "removed", text: "monday morning" },
      { kind: "added", text: "friday evening" },
    ]);
  });

  it("has nothing to mark when nothing changed", () => {
    expect(diffWords("Europe/Paris", "Europe/Paris")).toEqual([{ kind: "same", text: "Europe/Paris" }]);
    expect(diffWords("", "")).toEqual([]);
  });

  it("compares the longest values quickly", () => {
    const before = Array.from({ length: 400 }, (_, i) => `w${i}`).join(" ");
    const after = Array.from({ length: 400 }, (_, i) => (i % 7 === 0 ? `v${i}` : `w${i}`)).join(" ");
    const started = performance.now();
    expect(sides(diffWords(before, after))).toEqual([before, after]);
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe("how a change is shown", () => {
  it("strikes through what was removed and marks what was added (del and ins)", () => {
    const marked = text(render("Europe/Paris", "Europe/Lisbon"), {
      hidden: false,
      mark: { del: ["~", "~"], ins: ["+", "+"] },
    });
    expect(marked).toBe("Europe/~Paris~+Lisbon+");
  });

  it("says it in words for screen readers, not by its marks and colour alone", () => {
    expect(text(render("quarterly royalty statement", "quarterly sales statement"), { hidden: true })).toBe(
      "quarterly [removed: royalty][added: sales] statement",
    );
    expect(text(render("", "Europe/Paris"), { hidden: true })).toBe("[added: Europe/Paris]");
  });

  it("shows an unchanged text as it is", () => {
    expect(text(render("timezone", "timezone"), { hidden: true })).toBe("timezone");
  });
});

describe("how a change proposal is shown", () => {
  const rows = { dt: ["", ": "], dd: ["", "\n"], del: ["~", "~"], ins: ["+", "+"] } as Record<string, [string, string]>;

  it("shows the current value and its version, the proposed one, and what changes word by word", () => {
    const shown = ChangeText({ current: { id: "m1", version: 3, value: "helix" }, proposed: "helix with vim keys" });
    expect(text(shown, { hidden: false, mark: rows })).toBe(
      "Current (version 3): helix\nProposed: helix with vim keys\nWhat changes: helix+ with vim keys+\n",
    );
  });

  it("says a withheld current value is not shown, and compares nothing with it", () => {
    for (const value of [null, undefined]) {
      const shown = ChangeText({ current: { id: "m1", version: 2, value }, proposed: "Porto" });
      expect(text(shown, { hidden: true, mark: rows })).toBe(`Current (version 2): ${WITHHELD}\nProposed: Porto\n`);
    }
  });
});

describe("what a version came through", () => {
  it("names each surface", () => {
    expect(surfaceLabel("api")).toBe("the API");
    expect(surfaceLabel("mcp")).toBe("MCP");
    expect(surfaceLabel("console")).toBe("the console");
    expect(surfaceLabel("tool:openai")).toBe("a tool call (openai format)");
    expect(surfaceLabel("something-new")).toBe("something-new");
  });
});
