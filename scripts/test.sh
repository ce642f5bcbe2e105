#!/usr/bin/env bash
# The project's test command: lint, then the whole test suite, headless.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${PEAR_VENV:-.venv}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/python" -m pytest -q "$@"
