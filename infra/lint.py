"""cfn-lint over synthesised templates, with the one list of findings we accept and why.

cfn-lint checks templates against CloudFormation's resource specifications (property types,
allowed values, deprecated engine versions, …) for the regions in ``REGIONS``. Run it on a cloud
assembly with ``python -m infra.lint cdk.out/<stage>`` (``make synth`` does); it prints every
finding not in ``ACCEPTED`` and exits 1 if there is one.

This module imports no CDK code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ACCEPTED: dict[str, str] = {
    "W3005": "CDK writes an explicit DependsOn next to a Ref/GetAtt to the same resource (a "
    "function and its role, the proxy target group and the cluster); the duplicate ordering is "
    "harmless and comes from CDK itself, not from this app.",
}
"""cfn-lint rule id -> why its findings are accepted. Nothing else is."""

REGIONS: tuple[str, ...] = ("us-east-1",)
"""The regions whose resource specifications the templates are checked against (the stacks are
environment-agnostic; one region keeps the check fast, and the resource types used exist in
every commercial region)."""


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    template: str
    line: int

    def __str__(self) -> str:
        return f"{self.template}:{self.line}: {self.rule} {self.message}"


def templates_of(assembly: Path) -> list[Path]:
    """The stack templates of a cloud assembly directory (``cdk.out/<stage>``)."""
    found = sorted(assembly.glob("*.template.json"))
    if not found:
        raise FileNotFoundError(f"no *.template.json in {assembly}")
    return found


def lint(templates: Iterable[Path], regions: Sequence[str] = REGIONS) -> list[Finding]:
    """Every cfn-lint error and warning in ``templates`` whose rule is not ``ACCEPTED``."""
    from cfnlint.api import ManualArgs, lint_file

    config = ManualArgs(regions=list(regions), ignore_checks=sorted(ACCEPTED))
    findings: list[Finding] = []
    for template in templates:
        for match in lint_file(template, config):
            findings.append(Finding(match.rule.id, match.message, template.name, match.linenumber))
    return findings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m infra.lint cdk.out/<stage>", file=sys.stderr)
        return 2
    templates = templates_of(Path(args[0]))
    findings = lint(templates)
    for finding in findings:
        print(finding)
    print(f"cfn-lint: {len(templates)} templates, {len(findings)} findings", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
