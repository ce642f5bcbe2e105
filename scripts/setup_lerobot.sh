#!/usr/bin/env bash
# Sets up the separate LeRobot environment .venv-lerobot (never part of the core install), used by
# `pear-agent export --format lerobot` to write datasets with LeRobot's own writer and by the tests
# to load them with `LeRobotDataset`, and lerobot-doctor to check them.
# Why a separate venv: lerobot 0.4.4 (the newest release for Python 3.11; it writes dataset format
# v3.0) pins torch<2.11, torchvision<0.26, rerun-sdk<0.27, opencv<4.13, av<16, while the core runs
# torch 2.13 (CPU, for training) and a newer rerun-sdk. lerobot is installed --no-deps with only
# what its dataset code imports (no policies, no wandb, no diffusers).
#   bash scripts/setup_lerobot.sh
# Environment: PEAR_LEROBOT_VENV (default .venv-lerobot), PYTHON (python3, 3.10 or 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."

# FFmpeg's shared libraries: torchcodec (LeRobot's video decoder) loads the system's FFmpeg
if [ "${PEAR_SKIP_APT:-0}" != "1" ] && command -v apt-get >/dev/null 2>&1 \
  && ! ldconfig -p 2>/dev/null | grep -q "libavcodec\.so"; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
fi

VENV="${PEAR_LEROBOT_VENV:-.venv-lerobot}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
q() { grep -v -e "is ignored" -e "dependency resolver" -e "which is not installed" \
  -e "which is incompatible" || true; }
# torch + torchvision: LeRobot's dataset code imports both (transforms, video decoding); the pair
# 2.14.1 / 0.29.1 is the one whose torchvision imports beside its torch without a CUDA download here.
$PIP install -q "torch==2.14.1" "torchvision==0.29.1" 2>&1 | q
$PIP install -q "datasets>=4.0,<5" "huggingface-hub>=0.34.2,<0.36" "av>=15,<16" "jsonlines>=4" \
  "draccus==0.10.0" "packaging>=24.2,<26" "pandas" "pyarrow" "fsspec" "pillow" "einops>=0.8,<0.9" \
  "termcolor>=2.4" "deepdiff>=7" "imageio[ffmpeg]>=2.34" "opencv-python-headless>=4.9,<4.13" \
  "safetensors" "accelerate>=1.10,<2" "numpy" "pyyaml>=6" "pytest>=8" 2>&1 | q
# torchcodec: LeRobot's video decoder (torchvision 0.29 has no VideoReader for its "pyav" backend);
# 0.17 is the release built for this torch. --no-deps: lerobot's pin (<0.11) predates it.
$PIP install -q --no-deps "lerobot==0.4.4" "torchcodec==0.17.0" 2>&1 | q
# LeRobot's policies and trainer (ACT for `--policy lerobot:...`, lerobot-train): its policies
# package imports every policy's module, GR00T's needs diffusers; the factory imports gymnasium and
# the motor bus pyserial. No transformers: ACT and Diffusion Policy do not need it.
$PIP install -q "diffusers>=0.27.2,<0.36" "gymnasium>=1.1.1,<2" "pyserial>=3.5,<4" 2>&1 | q
# lerobot-doctor: a dataset-quality checker (not LeRobot's; its own deps: pyarrow, av, rich...), run
# on the control-rate export (docs/view-and-export.md, tests/export/test_lerobot_doctor.py)
$PIP install -q "lerobot-doctor==0.2.0" 2>&1 | q
"$VENV/bin/python" -c "from lerobot.datasets.lerobot_dataset import LeRobotDataset, CODEBASE_VERSION; print('setup_lerobot: ready, LeRobot dataset format', CODEBASE_VERSION)"
