"""Validation and test flights fly all at once, their turns decoded in one batch:
`evaluate` (what `train pick`, `train eval` and the RL benchmark fly) through the batched generator."""

from __future__ import annotations

from pear_agent.train.config import load_recipe


def test_evaluation_flies_every_flight_in_flight_in_lockstep(tiny, tiny_model_dir, tmp_path, monkeypatch):
    from pear_agent.train import batched
    from pear_agent.train import evaluate as evaluation
    from pear_agent.train.evaluate import eval_draws, evaluate

    made = []

    class Counting(batched.BatchedGenerator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(evaluation, "BatchedGenerator", Counting)  # the name `evaluate` builds
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


def test_sampled_test_flights_draw_from_their_test_seed_whatever_the_range(
    tiny, tiny_model_dir, tmp_path, monkeypatch
):
    """The RL benchmark's paired test at a temperature: the temperature reaches the sampler, and with
    `sampling_seed` a test seed's flight draws the same replies alone or beside other seeds (so two
    models, and two ranges that share a seed, fly it from one stream); another seed draws others."""
    from pear_agent.train.evaluate import evaluate
    from pear_agent.train.local_model import LocalModelPolicy
    from pear_agent.train.mix import Draw

    replies: list[tuple[float, int, int, tuple[int, ...]]] = []
    real = LocalModelPolicy._reply

    def spy(self, ids, res, t0):
        replies.append((self.temperature, self._episode_seed, self._turn, tuple(res.ids)))
        return real(self, ids, res, t0)

    monkeypatch.setattr(LocalModelPolicy, "_reply", spy)
    recipe = load_recipe(
        "roadster_study",
        "cpu",
        [f"model.name={tiny_model_dir}", "model.max_new_tokens=6", "grpo.max_turns=2", "observation=compact"],
    )
    task = "roadster_ramp_flip:light"

    def fly(seeds: list[int], sampling_seed: int) -> dict[tuple[int, int], tuple[int, ...]]:
        replies.clear()
        draws = [Draw(task, s, 0) for s in seeds]
        evaluate("tiny", draws, recipe, tmp_path / "t.jsonl", temperature=0.7, log=lambda *_: None,
                 loaded=tiny, sampling_seed=sampling_seed)  # fmt: skip
        assert replies and {r[0] for r in replies} == {0.7}  # the temperature reached every policy
        return {(s, turn): ids for _, s, turn, ids in replies}

    both = fly([20000, 20001], 3)
    alone = fly([20001], 3)
    assert alone == {k: v for k, v in both.items() if k[0] == 20001}
    other = fly([20001], 4)
    assert other.keys() == alone.keys() and other != alone
