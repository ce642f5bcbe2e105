"""The look-ahead expert against Meta-World itself: its copy replays the real simulation exactly and
never touches it, and a policy's dither is not a waypoint while a real turn of its path is."""

from __future__ import annotations

import numpy as np

from pear_agent.policies.chunking import expert_chunk
from pear_agent.policies.experts import within_caps
from pear_agent.robot.backend import PartCommand
from sim_adapters.metaworld.backend import MetaWorldBackend
from sim_adapters.metaworld.expert import (
    BEND_CM,
    LOOKAHEAD_STEPS,
    MAX_LEGS,
    WINDOW_STEPS,
    Rollout,
    metaworld_expert,
    native_policy,
    outcome,
    plan,
    rollout,
    unbent,
    waypoint,
)
from tests.metaworld.conftest import tool_speeds_cm


def _mj_state(env) -> np.ndarray:
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    out = np.zeros(mujoco.mj_stateSize(env.model, spec))
    mujoco.mj_getState(env.model, env.data, out, spec)
    return out


def test_the_copy_replays_the_real_simulation_step_for_step(mw_robot):
    """The copy, restored from a turn's facts, steps as the real environment does under the same
    policy, on two variations in a row (the copy is reset when the seed changes). Mutations seen
    to fail: dropping `mj_forward` in `restore_state` (the copy's first tool point is stale, off
    by cm), and never resetting the copy on a new seed (`if loaded != seed` -> `if loaded < 0`:
    seed 1 was replayed in seed 0's scene)."""
    import warnings

    name = "reach-v3"  # the variation moves the goal, which the policy heads for at once
    be = MetaWorldBackend(mw_robot, f"metaworld/{name}", render=False)
    try:
        for seed in (0, 1):
            be.reset(seed)
            be.execute({"arm": PartCommand(joints_rad=be.observe(render=False).joints_rad["arm"] + 0.03)})
            sim = be.privileged()["metaworld_sim"]
            r = rollout(name, sim, 25)
            policy, obs = native_policy(name), np.asarray(sim["obs"])
            real = [be.tcp()]
            for _ in range(25):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    a = np.clip(policy.get_action(obs.copy()), -1, 1)
                obs, *_ = be.env.step(a.astype(np.float32))
                real.append(be.tcp())
            assert np.allclose(r.tool_m, np.array(real), atol=1e-9), f"seed {seed}"
    finally:
        be.close()


def test_looking_ahead_leaves_the_real_simulation_untouched(mw_robot):
    """The expert's turn changes nothing in the backend's simulation (its state, step count and
    observation) and the episode then runs as it would have without it. Mutation seen to fail:
    `make_env` memoised per task (`@functools.lru_cache` on it), so that the copy IS the backend's
    environment: the state had moved 60+ steps on."""
    be = MetaWorldBackend(mw_robot, "metaworld/push-v3", render=False)
    try:
        obs = be.reset(2)
        before, steps, obs39 = _mj_state(be.env), be.steps, be._obs.copy()
        state = {"arm": {"position": list(obs.joints_rad["arm"] * 100), "gripper": obs.gripper["arm"]}}
        why, act = metaworld_expert(state, obs.privileged)
        assert "looked ahead" in why and "position" in act["arm"]
        assert np.array_equal(_mj_state(be.env), before)
        assert be.steps == steps and np.array_equal(be._obs, obs39)
    finally:
        be.close()


def _rollout(commands_cm: list[list[float]], effort: float = -1.0) -> Rollout:
    c = np.array(commands_cm, dtype=float)
    tool = np.vstack([np.zeros(3), np.cumsum(c, axis=0) / 100.0])
    return Rollout(c, np.full(len(c), effort), tool, np.zeros(len(c) + 1, bool), tool.copy())


def test_a_dither_is_not_a_waypoint_but_a_turn_is():
    """A policy flipping between two branches every few steps (door-close: +x while y and z
    alternate +-1 cm) goes on to the turn's reach; a path that turns 90 degrees and stays turned ends the
    turn at the corner; a grip flip that reverses at once is no grip change. Mutations seen to
    fail: `WINDOW_STEPS = 1` (the dither cut the turn after one step) and `_persists` returning
    True (the one-step grip flip ended the turn)."""
    dither = [[0.6, 0.6 * (-1) ** (i // 4), -0.6 * (-1) ** (i // 4)] for i in range(LOOKAHEAD_STEPS + 8)]
    k, why = waypoint(_rollout(dither), LOOKAHEAD_STEPS)
    assert k >= 15 and why == "a turn's reach", (k, why)

    corner = [[0.5, 0, 0]] * 12 + [[0, 0, 0.5]] * 20
    k, why = waypoint(_rollout(corner), LOOKAHEAD_STEPS)
    assert why == "the path turns" and 6 <= k <= 12, (k, why)

    flip = _rollout([[0.5, 0, 0]] * 30)
    flip.efforts[10] = 1.0  # one step's grip flip, reversed at once
    k, why = waypoint(flip, LOOKAHEAD_STEPS)
    assert why != "the grip changes", (k, why)
    flip.efforts[10:] = 1.0  # a grip change that holds
    assert waypoint(flip, LOOKAHEAD_STEPS) == (10, "the grip changes")


def test_stopping_the_look_ahead_early_decides_the_same_waypoint(mw_robot):
    """`plan` stops its rollout once the waypoint is certain; over the turns of real episodes it
    gives the waypoint the whole rollout gives. Mutation seen to fail: `sure = n - WINDOW_STEPS`
    (a turn decided on windows still open: a different waypoint on some turn)."""
    for name, seed in (("door-close-v3", 0), ("handle-pull-v3", 0)):
        be = MetaWorldBackend(mw_robot, f"metaworld/{name}", render=False)
        try:
            obs = be.reset(seed)
            for _ in range(5):
                sim = obs.privileged["metaworld_sim"]
                whole = rollout(name, sim, LOOKAHEAD_STEPS + WINDOW_STEPS)
                r, k, why = plan(name, sim)
                kw, why_w = waypoint(whole, LOOKAHEAD_STEPS)
                bend = unbent(whole, kw)  # the same path up to the waypoint: the same bend
                assert (k, why) == ((bend, "the path bends") if bend < kw else (kw, why_w)), name
                assert np.allclose(r.mocap_m[k], whole.mocap_m[k], atol=1e-12)
                arm = {"position": list(obs.joints_rad["arm"] * 100), "gripper": obs.gripper["arm"]}
                _, act = metaworld_expert({"arm": arm}, obs.privileged)
                move = np.asarray(act["arm"].get("position", [0, 0, 0])) / 100
                be.execute({"arm": PartCommand(joints_rad=obs.joints_rad["arm"] + move)})
                obs = be.observe(render=False)
        finally:
            be.close()


def test_a_turn_is_one_straight_move_cut_at_the_bend():
    """A path that goes 3 cm down and then 5 cm sideways (the peg policy closing on the peg, then
    carrying it off) ends the turn near the corner, not on a diagonal through the peg; a straight
    path, and a dither whose y and z flip every 2 steps (which the averaging cancels), are left
    whole."""
    ell = _rollout([[0, 0, -0.6]] * 5 + [[0.5, 0, 0]] * 10)
    k = unbent(ell, 15)
    assert 4 <= k <= 7, k
    straight = _rollout([[0.4, 0.3, -0.2]] * 20)
    assert unbent(straight, 20) == 20
    dither = _rollout([[0.6, 0.6 * (-1) ** (i // 2), -0.6 * (-1) ** (i // 2)] for i in range(60)])
    assert [unbent(dither, n) for n in (12, 20, 32, 60)] == [12, 20, 32, 60]
    assert BEND_CM < 2.0  # the L's corner strays about 2 cm from the diagonal


def test_the_first_turn_grips_as_the_policy_does(mw_robot):
    """Before any move has set the grip the backend reports none held (the reset's open fingers
    were nobody's choice), so the lever-pull policy, which keeps its fingers closed from the start,
    gets them closed on its first turn, though that turn is cut by the per-turn reach; once a move
    set the grip, the fact says which. (With the fact reporting the reset's -1, the first turns ran
    with open fingers and pushed the lever aside: lever-pull seed 0 failed.)"""
    be = MetaWorldBackend(mw_robot, "metaworld/lever-pull-v3", render=False)
    try:
        obs = be.reset(0)
        assert obs.privileged["metaworld_sim"]["effort"] is None
        state = {"arm": {"position": list(obs.joints_rad["arm"] * 100), "gripper": obs.gripper["arm"]}}
        why, act = metaworld_expert(state, obs.privileged)
        assert "a turn's reach" in why and act["arm"]["gripper"] == 0.0, (why, act)
        be.execute({"arm": PartCommand(gripper=act["arm"]["gripper"])})
        assert be.observe(render=False).privileged["metaworld_sim"]["effort"] == 1.0
    finally:
        be.close()


def test_the_check_runs_the_protocols_own_move_in_the_copy(mw_robot):
    """`outcome` (the copy running a turn's action through the backend's own move) leaves the
    objects where the real backend's move then leaves them (within 0.1 mm: the copy differs from
    the real run by a few micrometres, against a check that compares at 1.5 cm), and the real
    simulation is not touched by it."""
    be = MetaWorldBackend(mw_robot, "metaworld/push-v3", render=False)
    try:
        obs = be.reset(1)
        for _ in range(4):  # down to the puck and into it: the last turns move it
            state = {"arm": {"position": list(obs.joints_rad["arm"] * 100), "gripper": obs.gripper["arm"]}}
            _, act = metaworld_expert(state, obs.privileged)
            sim = obs.privileged["metaworld_sim"]
            before = _mj_state(be.env)
            predicted = outcome("push-v3", sim, act["arm"])
            assert np.array_equal(_mj_state(be.env), before)
            arm = act["arm"]
            target = obs.joints_rad["arm"] + np.asarray(arm.get("position", [0, 0, 0])) / 100
            cmd = PartCommand(
                joints_rad=target if "position" in arm else None,
                gripper=arm["gripper"],
                press=bool(arm.get("press")),
            )
            be.execute({"arm": cmd})
            obs = be.observe(render=False)
            assert np.allclose(predicted[0], be._obs[4:7], atol=1e-4), (predicted[0], be._obs[4:7])
    finally:
        be.close()


def _state(obs) -> dict:
    return {"arm": {"position": list(obs.joints_rad["arm"] * 100), "gripper": obs.gripper["arm"]}}


def test_a_push_the_cap_cuts_goes_on_in_one_chunk(mw_robot):
    """stick-pull pushes its thermos with the stick ~20 cm in one continuous push, longer than a
    turn's 10 cm: where the runtime takes chunks the expert's reply is a list that goes on with
    the push (the later steps say so, at most `MAX_LEGS`), the backend runs it through without the
    hand coming to rest at a waypoint, and the thermos moves during it. Asked for one step
    (`max_chunk` 1) on the same state, the expert sends the first step alone."""
    be = MetaWorldBackend(mw_robot, "metaworld/stick-pull-v3", render=False)
    expert = within_caps(metaworld_expert)
    try:
        obs = be.reset(0)
        for _ in range(12):
            state = _state(obs)
            why, steps, _ = expert_chunk(expert, state, obs.privileged, MAX_LEGS)
            if len(steps) > 1:
                break
            _run_steps(be, obs, steps)
            obs = be.observe(render=False)
        else:
            raise AssertionError("no chunk in 12 turns")
        assert "the push goes on" in why and "checked as a whole" in why, why
        assert all("position" in s["arm"] for s in steps), steps
        _, one, _ = expert_chunk(expert, state, obs.privileged, 1)
        assert len(one) == 1 and one[0] == steps[0], (one, steps)
        thermos = be._obs[11:14].copy()
        reached: list[int] = []
        speed = tool_speeds_cm(be, lambda: reached.append(_run_steps(be, obs, steps)))
        assert reached == [len(steps)]
        moving = np.nonzero(speed > 0.5 * speed.max())[0]
        assert speed[moving[0] : moving[-1] + 1].min() > 0.3 * speed.max(), speed.round(2)
        assert np.linalg.norm(be._obs[11:14] - thermos) * 100 > 5.0
    finally:
        be.close()


def test_a_turn_that_is_no_push_is_never_chunked_on_a_stale_state(mw_robot):
    """The chunking asks the expert again on the state its step predicts, with the facts (the
    simulation's state) still those of the reply's start. A look-ahead from those facts would plan
    the same turn again and the chunk would repeat it (the hand sent 3 x 9 cm in one reply, the
    stick left behind: stick-pull 0/5); the expert ends the chunk there instead, so every turn of
    a task without a push is one step even where the runtime takes chunks."""
    be = MetaWorldBackend(mw_robot, "metaworld/reach-v3", render=False)
    expert = within_caps(metaworld_expert)
    try:
        obs = be.reset(0)
        why, steps, _ = expert_chunk(expert, _state(obs), obs.privileged, 4)
        assert len(steps) == 1 and "position" in steps[0]["arm"], (why, steps)
        moved = dict(_state(obs)["arm"])
        moved["position"] = list(np.asarray(moved["position"]) + np.asarray(steps[0]["arm"]["position"]))
        why2, act2 = metaworld_expert({"arm": moved}, obs.privileged)
        assert act2 == {"arm": {}}, (why2, act2)
    finally:
        be.close()


def test_a_chunk_in_the_copy_runs_as_the_backends_chunk(mw_robot):
    """`outcome` given a list of actions runs them as the backend's own chunk (each target the
    previous one's plus its move, passed at speed): the copy leaves the objects where a real
    backend's `execute_chunk` of the same steps leaves them, and the real simulation is untouched."""
    be = MetaWorldBackend(mw_robot, "metaworld/push-v3", render=False)
    try:
        obs = be.reset(1)
        sim = obs.privileged["metaworld_sim"]
        puck = to_ours_cm(be._obs[4:7]) - np.asarray(obs.joints_rad["arm"]) * 100
        first = [puck[0] - 6.0, puck[1], puck[2] + 0.5]  # behind the puck, then through it
        acts = [{"gripper": 1.0, "position": first}, {"gripper": 1.0, "position": [9.0, 0.0, 0.0]}]
        before = _mj_state(be.env)
        got, _ = outcome("push-v3", sim, acts, success=True)
        assert np.array_equal(_mj_state(be.env), before)
        steps = [{"arm": a} for a in acts]
        assert _run_steps(be, obs, steps) == 2
        assert np.linalg.norm(be._obs[4:7] - obs.privileged["metaworld_obs"][4:7]) * 100 > 1.0  # it moved
        assert np.allclose(got[0], be._obs[4:7], atol=1e-4), (got[0], be._obs[4:7])
    finally:
        be.close()


def to_ours_cm(p) -> np.ndarray:
    p = np.asarray(p, float) * 100
    return np.array([p[1], -p[0], p[2]])


def _run_steps(be: MetaWorldBackend, obs, steps) -> int:
    """The expert's steps (changes from the previous step's target) as the backend's chunk."""
    at = np.asarray(obs.joints_rad["arm"], float)
    commands = []
    for s in steps:
        arm = s["arm"]
        if "position" in arm:
            at = at + np.asarray(arm["position"], float) / 100
        target = at.copy() if "position" in arm else None
        commands.append(
            {"arm": PartCommand(joints_rad=target, gripper=arm.get("gripper"), press=bool(arm.get("press")))}
        )
    return be.execute_chunk(commands)[1]


def test_a_push_chunk_is_sent_only_where_it_matches_the_policys_effect():
    """The lever-pull policy drives the lever at speed, a push the cap cuts; where the chunk, run in
    the copy, leaves the lever farther from where the policy's own steps leave it than the single
    turn does, the single turn goes, and seed 1 succeeds through the whole loop with the robot's
    default chunks. With every such chunk sent unchecked, seeds 1-3 ended at the turn limit (2/5)."""
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.loop.registry import make_environment
    from pear_agent.loop.task_experts import scripted_policy

    task = "metaworld/lever-pull-v3"
    env = make_environment(task, render=False)
    try:
        assert env.max_chunk == MAX_LEGS
        result = Episode(env, scripted_policy(task), EpisodeConfig()).run(1)
    finally:
        env.close()
    assert result.success, (result.end_reason, result.turns)
