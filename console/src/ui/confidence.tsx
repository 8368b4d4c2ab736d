import { percent } from "./format";

/** A confidence (0–1) as a bar with its number, named for screen readers. */
export function ConfidenceBar({ value, label = "Confidence" }: { value: number; label?: string }) {
  const shown = percent(value);
  return (
    <span class="confidence">
      <meter min={0} max={1} low={0.3} high={0.7} optimum={1} value={value} aria-label={`${label} ${shown}`} />
      <span aria-hidden="true">{shown}</span>
    </span>
  );
}
