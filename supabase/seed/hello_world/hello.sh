#!/usr/bin/env bash
# Parameters arrive as KIWI_PARAM_<NAME> (and as one JSON object on stdin).
set -euo pipefail
name="${KIWI_PARAM_NAME:-world}"
printf '{"greeting": "Hello, %s!"}\n' "$name"
