#!/usr/bin/env bash
# Synthesise, diff or deploy one stage of Engram:  bash infra/cdk.sh synth|diff|deploy STAGE
# (the Makefile runs it under `uv run`, so `python` is the project's virtualenv).
# Offline for synth: no Docker (local bundling), no context lookups, no AWS credentials.
set -euo pipefail

usage() { echo "usage: bash infra/cdk.sh synth|diff|deploy|destroy|bootstrap dev|staging|prod [cdk args...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
command="$1"; stage="$2"; shift 2
case "$command" in synth|diff|deploy|destroy|bootstrap) ;; *) usage ;; esac
case "$stage" in dev|staging|prod) ;; *) echo "infra/cdk.sh: unknown stage '$stage'" >&2; usage ;; esac

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="${JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION:-20}"
export CDK_DISABLE_VERSION_CHECK="${CDK_DISABLE_VERSION_CHECK:-1}"
export CDK_DISABLE_CLI_TELEMETRY="${CDK_DISABLE_CLI_TELEMETRY:-true}"

# The CDK CLI is pinned by infra/package-lock.json.
if [ ! -x infra/node_modules/.bin/cdk ]; then
  npm ci --prefix infra --no-audit --no-fund --loglevel=error >&2
fi
cdk=(infra/node_modules/.bin/cdk --no-notices -c "stage=$stage")
outdir="${CDK_OUTDIR:-cdk.out/$stage}"

case "$command" in
  synth)   exec "${cdk[@]}" synth --quiet --output "$outdir" "$@" ;;
  diff)    exec "${cdk[@]}" diff --all --output "$outdir" "$@" ;;
  deploy)  exec "${cdk[@]}" deploy --all --output "$outdir" --require-approval broadening "$@" ;;
  destroy) exec "${cdk[@]}" destroy --all --output "$outdir" "$@" ;;
  bootstrap) exec "${cdk[@]}" bootstrap --output "$outdir" "$@" ;;
esac
