"""Recipes: the packaged ones load (with their cpu profile), and a bad one is one clear line."""

from __future__ import annotations

import pytest

from pear_agent.train.config import load_recipe, recipe_names


def test_the_study_recipe_is_the_studys():
    r = load_recipe("roadster_study")
    assert r.model.name == "Qwen/Qwen3-4B-Instruct-2507" and r.model.lora.r == 64
    assert (r.grpo.steps, r.grpo.groups_per_step, r.grpo.group_size, r.grpo.checkpoint_every) == (
        60,
        16,
        8,
        5,
    )
    assert r.sft.epochs == 1 and r.eval.test_episodes == {"light": 192, "gale": 192, "storm": 384}
    mix = r.grpo.stages[0].mix
    weight = {b: sum(e.weight for e in mix if e.task.endswith(b)) for b in ("light", "gale", "storm")}
    assert weight["storm"] == pytest.approx(2 * weight["light"]) == pytest.approx(2 * weight["gale"])
    kick = [e for e in mix if e.task.startswith("roadster_kickflip")]
    slow = sum(e.weight for e in kick if e.filter == "slow_approach")
    assert slow == pytest.approx(sum(e.weight for e in kick) / 2)


def test_every_recipe_and_profile_loads():
    for name in recipe_names():
        base = load_recipe(name)
        for profile in base.profiles:
            assert load_recipe(name, profile).model.name in ("smollm2", "tiny-idefics3")
    cpu = load_recipe("libero_pear", "cpu")  # LIBERO with camera images, a vision-language model
    assert cpu.model.name == "tiny-idefics3" and cpu.observation == "both"
    assert {e.task for e in cpu.grpo.stages[1].mix} == {
        f"libero_{s}/*" for s in ("goal", "spatial", "object", "10")
    }
    pear = load_recipe("libero_pear")
    assert [s.steps for s in pear.grpo.stages] == [148, 77, None]
    assert pear.grpo.steps - 148 - 77 == 115  # the paper's last 115 steps on its dual-arm tasks
    assert {e.task for e in pear.grpo.stages[0].mix} == {
        "libero_goal/*",
        "libero_spatial/*",
        "libero_object/*",
    }
    assert "libero_10/*" in {e.task for e in pear.grpo.stages[1].mix}


def test_libero_pear_stage_3_is_the_two_yam_tasks():
    """Stage 3 expands to the ten objects and the ruler task, both built on the YAM by default."""
    from pear_agent.loop.registry import task_entry
    from pear_agent.train.mix import expand_tasks

    stage3 = load_recipe("libero_pear").grpo.stages[2]
    tasks = [t for e in stage3.mix for t in expand_tasks(e.task)]
    assert len([t for t in tasks if t.startswith("pick_up_object/")]) >= 10 and "align_with_ruler" in tasks
    assert {task_entry(t).default_robot for t in tasks} == {"yam_bimanual"}


def test_overrides_and_bad_recipes_are_one_line(tmp_path):
    assert load_recipe("roadster_study", "cpu", ["grpo.steps=7"]).grpo.steps == 7
    with pytest.raises(ValueError, match=r"grpo\.group_size: Input should be greater than or equal to 2"):
        load_recipe("roadster_study", sets=["grpo.group_size=1"])
    with pytest.raises(ValueError, match="use KEY=VALUE"):
        load_recipe("roadster_study", sets=["grpo.steps"])
    with pytest.raises(ValueError, match="has no profile 'tpu'"):
        load_recipe("roadster_study", "tpu")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="is not valid YAML"):
        load_recipe(str(bad))
    with pytest.raises(ValueError, match="no recipe 'nope'"):
        load_recipe("nope")


def test_a_recipes_loop_settings_are_checked_by_the_loops_own_definition():
    """`observation`, `scene_facts`, `grpo.max_turns` and `grpo.mode` are `EpisodeConfig` settings:
    a recipe gives them, `EpisodeConfig` checks them (the same message as `--max-turns 0`)."""
    message = r"^recipe roadster_study.yaml: Value error, --max-turns must be >= 1$"
    with pytest.raises(ValueError, match=message):
        load_recipe("roadster_study", sets=["grpo.max_turns=0"])
    assert load_recipe("roadster_study", sets=["grpo.max_turns=3"]).grpo.max_turns == 3


def test_the_arm_recipe_flies_pick_cube_from_text_with_positions_relative_to_the_tool():
    cpu = load_recipe("arm_pick", "cpu")
    assert cpu.model.name == "smollm2" and cpu.observation == "compact"
    assert cpu.scene_facts and cpu.scene_relative and cpu.grpo.reward == "shaped"
    tasks = [e.task for s in cpu.grpo.stages for e in s.mix]
    assert tasks == ["pick_cube"] == [e.task for e in cpu.teacher.mix]
    message = r"^recipe arm_pick.yaml: Value error, --scene-relative needs --scene-facts"
    with pytest.raises(ValueError, match=message):
        load_recipe("arm_pick", "cpu", sets=["scene_facts=false"])
