#!/usr/bin/env bash
# Sets up the separate Meta-World environment .venv-metaworld (never part of the core install):
# Meta-World 3.1.1 from PyPI with its pinned MuJoCo 3.3.0 (the core runs a newer MuJoCo), and this
# package with its own dependencies at versions that agree with it. Nothing is downloaded when an
# episode runs (Meta-World's scenes ship in its wheel).
#   bash scripts/setup_metaworld.sh
#   .venv-metaworld/bin/pear-agent bench --preset metaworld_mt10 --no-video
# Environment: PEAR_METAWORLD_VENV (default .venv-metaworld), PYTHON (python3, 3.10-3.13).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  echo "setup_metaworld: unknown option $arg (it takes none)" >&2
  exit 2
done
VENV="${PEAR_METAWORLD_VENV:-.venv-metaworld}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
# A new .venv-metaworld takes about 0.6 GB (MuJoCo, Pinocchio, OpenCV, Meta-World's assets).
NEED_GB=1
if ! $PIP show -q metaworld >/dev/null 2>&1; then
  free_gb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print int($4 / 1048576)}')
  if [ "${free_gb:-0}" -lt "$NEED_GB" ]; then
    echo "setup_metaworld: only ${free_gb} GB free on the disk of $VENV; it needs about $NEED_GB GB" >&2
    exit 1
  fi
fi
q() { grep -v -e "is ignored" -e "dependency resolver" || true; }
# Meta-World at its pins (mujoco 3.3.0, gymnasium), this package (its requirements accept mujoco
# 3.3.0) with the video extra, and pytest for tests/metaworld.
$PIP install -q metaworld==3.1.1 mujoco==3.3.0 -e ".[sim]" "pytest>=8" 2>&1 | q
"$VENV/bin/python" -c "import numpy, mujoco, metaworld, pinocchio; from pear_agent.loop.registry import family_of; fam = family_of('metaworld/reach-v3'); print(f'setup_metaworld: ready (numpy {numpy.__version__}, mujoco {mujoco.__version__}, pinocchio {pinocchio.__version__}; Meta-World tasks: {len(fam.task_names())})')"
