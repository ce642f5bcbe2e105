"""`GRPOTrainer.update` on one tree: three updates on the same collected group (a tiny Llama, CPU),
PEAR's estimator, the clipped surrogate with a KL term, and stale tokens; prints every number as
repr (bit for bit). Run it on two trees and compare the lines:

    PYTHONPATH=OLD_TREE .venv/bin/python benchmarks/house_grpo_update.py > before.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/house_grpo_update.py > after.json
"""

import json
import tempfile
from pathlib import Path

from pear_agent.train.config import load_recipe
from pear_agent.train.episodes import run_episodes
from pear_agent.train.grpo import GRPOTrainer
from pear_agent.train.model_files import write_tiny_llama

tmp = Path(tempfile.mkdtemp())
model = write_tiny_llama(tmp / "tiny")
out = {}
for name, extra in {
    "pear": [],
    "clip_kl": ["grpo.clip_eps=0.2", "grpo.kl_coef=0.1"],
    "kl_logged": [],
}.items():
    recipe = load_recipe(
        "roadster_study",
        "cpu",
        [
            f"model.name={model}",
            "model.lora.r=4",
            "model.max_new_tokens=4",
            "grpo.groups_per_step=1",
            "grpo.group_size=2",
            "grpo.max_turns=2",
            "grpo.learning_rate=0.01",
            "grpo.curriculum=false",
            "grpo.reward=binary",
            "grpo.micro_batch=1",
            *extra,
        ],
    )
    calls = [0]

    def runs(jobs, make_policy, opts, on_record=None, calls=calls, **kw):
        recs = run_episodes(jobs, make_policy, opts, on_record, **kw)
        for r in recs:
            r["success"] = calls[0] > 0 and r["index_in_group"] % 2 == 0
        calls[0] += 1
        return recs

    tr = GRPOTrainer(recipe, tmp / name, log=lambda *_: None, run_fn=runs)
    kept, _ = tr.collect(0)
    rows = []
    for _ in range(3):
        loss, tokens, drift, compared = tr.update(kept)
        rows.append(
            [repr(loss), tokens, repr(drift), compared, {k: repr(v) for k, v in tr.last_update.items()}]
        )
    out[name] = rows
    tr.close()
print(json.dumps(out, sort_keys=True))
