"""Validation and test flights fly all at once, their turns decoded in one batch (issue 38 item 3):
`evaluate` (what `train pick`, `train eval` and the RL benchmark fly) through the batched generator."""

from __future__ import annotations

from pear_agent.train.config import load_recipe


def test_evaluation_flies_every_flight_in_flight_in_lockstep(tiny, tiny_model_dir, tmp_path, monkeypatch):
    from pear_agent.train import batched
    from pear_agent.train.evaluate import eval_draws, evaluate

    made = []

    class Counting(batched.BatchedGenerator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(batched, "BatchedGenerator", Counting)
    recipe = load_recipe(
        "roadster_study",
        "cpu",
        [f"model.name={tiny_model_dir}", "model.max_new_tokens=4", "grpo.max_turns=2"],
    )
    draws = eval_draws(recipe, "val", 3)
    lines = evaluate("tiny", draws, recipe, tmp_path / "val.jsonl", log=lambda *_: None, loaded=tiny)
    assert [(x["task"], x["seed"]) for x in lines] == [(d.task, d.seed) for d in draws]  # the draws' order
    assert len((tmp_path / "val.jsonl").read_text().splitlines()) == 3
    (gen,) = made
    turns = [x["turns"] for x in lines]
    # lockstep: one batch per round of turns, each of every flight still flying (not one per turn)
    assert gen.stats.batches == max(turns) and gen.stats.rows == sum(turns)
