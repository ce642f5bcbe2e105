"""One episode runner. `bench`, RL rollouts and the trainer run their episodes through
`pear_agent.loop.runner.arun_episode` (pooled environment, rewards read before the environment goes
back, token traces, policy version); a second copy of the pool-run-release code fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pear_agent", "sim_adapters")
RUNNER = "pear_agent.loop.runner"
EPISODE = "pear_agent.loop.episode.Episode"
BUILDERS = {EPISODE, EPISODE + ".of", "pear_agent.loop.arm_environment.arm_episode"}
"""What builds an Episode: the class (its old `of` kept so an old spelling is still caught) and
`arm_episode`, which builds the arm's environment and its Episode."""
POOL_CLASS = "pear_agent.loop.runner.EnvironmentPool"
POOL = "pear_agent.loop.runner.POOL"
POOL_OPS = ("acquire", "release", "discard")
BUILD_ENV = "pear_agent.loop.registry.make_spec_environment"
SINGLE_EPISODE = {
    "pear_agent.loop.episode": "defines Episode",
    "pear_agent.loop.arm_environment": "`arm_episode` builds the arm's environment for an Episode; it "
    "runs none",
    "pear_agent.cli": "`pear-agent run`: one episode, its own environment, no pool",
    "pear_agent.cli.robots_check": "a robot's self-check on a bare backend",
    "pear_agent.ros2.agent_node": "one live episode on a ROS 2 robot",
    "pear_agent.ros2.twin_replay": "`pear-agent ros replay`: one recorded robot episode in its twin, no pool",
    "pear_agent.rl.skyrl_env": "SkyRL's gym interface steps one episode turn by turn (SkyRL owns the loop)",
}
"""Modules allowed to build an `Episode` themselves, and why: none of them pools environments or
runs more than one episode."""


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` of a Name / Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class ModuleScan:
    """What one module does with the runner's parts, by what its names refer to (its imports,
    aliases and assignments resolved to qualified names; one namespace per module, so a name bound
    anywhere counts everywhere: the scan errs towards flagging): calls that build an Episode, and
    uses of a pool's acquire / release / discard or of make_spec_environment."""

    def __init__(self, module: str, source: str, is_package: bool = False) -> None:
        self.module, self.tree = module, ast.parse(source)
        self.package = module if is_package else module.rpartition(".")[0]
        self.names: dict[str, str] = {}
        """local name -> the qualified name it refers to"""
        self.pool_vars: set[str] = set()
        """names (and dotted attributes, e.g. self.envs) that hold an EnvironmentPool"""
        self.episode_classes, self.pool_classes = set(BUILDERS), {POOL_CLASS}
        for _ in range(4):  # aliases of aliases, subclasses of subclasses: to a fixed point
            self._bind()

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def resolve(self, node: ast.AST) -> str | None:
        """The qualified name an expression refers to (None when it is no imported or module-level
        name: a local variable, a call's result)."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def is_pool(self, node: ast.AST) -> bool:
        if _dotted(node) in self.pool_vars or self.resolve(node) == POOL:
            return True
        return isinstance(node, ast.Call) and self.resolve(node.func) in self.pool_classes

    def _bind(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.names[a.asname] = a.name
                    else:  # `import a.b.c` binds `a`
                        top = a.name.split(".")[0]
                        self.names[top] = top
            elif isinstance(node, ast.ImportFrom):
                mod = self._absolute(node)
                for a in node.names:
                    self.names[a.asname or a.name] = f"{mod}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.names.setdefault(node.name, f"{self.module}.{node.name}")
                args = node.args
                positional = [*args.posonlyargs, *args.args]
                defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
                pairs = [
                    *zip(positional, defaults, strict=True),
                    *zip(args.kwonlyargs, args.kw_defaults, strict=True),
                ]
                for arg, default in pairs:
                    typed = arg.annotation is not None and self.resolve(arg.annotation) in self.pool_classes
                    if typed or (default is not None and self.is_pool(default)):
                        self.pool_vars.add(arg.arg)
            elif isinstance(node, ast.ClassDef):
                qual = f"{self.module}.{node.name}"
                self.names.setdefault(node.name, qual)
                bases = {self.resolve(b) for b in node.bases}
                if bases & {EPISODE}:
                    self.episode_classes |= {qual, qual + ".of"}
                if bases & self.pool_classes:
                    self.pool_classes.add(qual)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                if value is None:
                    continue
                ann = getattr(node, "annotation", None)
                pooled = self.is_pool(value) or (ann is not None and self.resolve(ann) in self.pool_classes)
                ref = self.resolve(value)
                for t in targets:
                    key = _dotted(t)
                    if key is None:
                        continue
                    if pooled:
                        self.pool_vars.add(key)
                    if ref is not None and isinstance(t, ast.Name):
                        self.names[t.id] = ref  # `E = Episode`, `acquire = POOL.acquire`

    def builds(self) -> list[str]:
        """Calls that build an Episode (of the class, its `of`, or a subclass)."""
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and self.resolve(node.func) in self.episode_classes:
                out.append(f"{ast.unparse(node.func)}() line {node.lineno}")
        return out

    def pooled(self) -> list[str]:
        """A pool's acquire / release / discard used (called or taken, by attribute or getattr),
        or make_spec_environment (the pool's builder) used."""
        out = []
        for node in ast.walk(self.tree):
            taken = isinstance(node, ast.Attribute) and node.attr in POOL_OPS and self.is_pool(node.value)
            by_name = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and self.is_pool(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in POOL_OPS
            )
            builder = isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
            if taken or by_name or (builder and self.resolve(node) == BUILD_ENV):
                out.append(f"{ast.unparse(node)} line {node.lineno}")
        return out


def offenders(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Modules (name -> (source, is a package's __init__)) that run episodes outside the runner:
    a pool used, or an Episode built outside SINGLE_EPISODE."""
    out = []
    for module, (source, is_package) in sorted(sources.items()):
        if module == RUNNER:
            continue
        scan = ModuleScan(module, source, is_package)
        builds = scan.builds() if module not in SINGLE_EPISODE else []
        pooled = [] if module == "pear_agent.loop.registry" else scan.pooled()
        if builds or pooled:
            out.append(f"{module}: {builds + pooled}")
    return out


def package_sources() -> dict[str, tuple[str, bool]]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_package else parts)
            out[module] = (path.read_text(encoding="utf-8"), is_package)
    return out


def test_only_the_runner_builds_episodes_and_takes_environments_from_a_pool() -> None:
    """Mutation tried by hand: a second runner in pear_agent/rl/rollouts.py,
    `from pear_agent.loop import episode as ep; from pear_agent.loop.runner import POOL as envs;
    ep.Episode.of(envs.acquire(spec), policy)`: the former scan by names passed it; this one fails
    with "pear_agent.rl.rollouts: ['ep.Episode.of() line 244', 'envs.acquire line 244']"."""
    found = offenders(package_sources())
    assert not found, (
        "episodes run outside the one runner (pear_agent/loop/runner.py: arun_episode): " + "; ".join(found)
    )


def test_the_runner_itself_still_has_the_pattern() -> None:
    """The scan above would pass vacuously if it no longer recognised the runner's own calls."""
    source = (REPO / "pear_agent" / "loop" / "runner.py").read_text(encoding="utf-8")
    scan = ModuleScan(RUNNER, source)
    assert any(b.startswith("Episode()") for b in scan.builds()), scan.builds()
    used = " ".join(scan.pooled())
    assert all(f"pool.{op}" in used for op in POOL_OPS) and "make_spec_environment" in used, used


EVASIONS = {
    "an aliased class": "from pear_agent.loop.episode import Episode as E\nE(env, policy)",
    "the module's attribute": "from pear_agent.loop import episode\nepisode.Episode(env, policy)",
    "an aliased module": "import pear_agent.loop.episode as ep\nep.Episode.of(env, policy)",
    "the full path": "import pear_agent.loop.episode\npear_agent.loop.episode.Episode.of(env, policy)",
    "a relative import": "from ..loop.episode import Episode\nEpisode.of(env, policy)",
    "a name bound to it": (
        "from pear_agent.loop.episode import Episode\nbuild = Episode.of\nbuild(env, policy)"
    ),
    "a subclass": (
        "from pear_agent.loop.episode import Episode\nclass Mine(Episode):\n    pass\nMine(env, policy)"
    ),
    "an aliased pool": "from pear_agent.loop.runner import POOL as shared\nenv = shared.acquire(spec)",
    "the pool by module": "from pear_agent.loop import runner as episodes\nepisodes.POOL.discard(env)",
    "a pool not named pool": (
        "from pear_agent.loop.runner import EnvironmentPool\nenvs = EnvironmentPool()\nenvs.acquire(spec)"
    ),
    "a pool held by an object": (
        "from pear_agent.loop.runner import EnvironmentPool\nclass R:\n    def __init__(self):\n"
        "        self.envs = EnvironmentPool()\n    def go(self, spec):\n"
        "        return self.envs.acquire(spec)"
    ),
    "a pool parameter": (
        "from pear_agent.loop.runner import EnvironmentPool\ndef run(p: EnvironmentPool):\n"
        "    p.release(spec, env)"
    ),
    "a pool default": (
        "from pear_agent.loop.runner import POOL\ndef run(spec, where=POOL):\n    return where.acquire(spec)"
    ),
    "a pool subclass": (
        "from pear_agent.loop import runner as episodes\nclass Mine(episodes.EnvironmentPool):\n    pass\n"
        "Mine().acquire(spec)"
    ),
    "a pool's method taken": "from pear_agent.loop.runner import POOL\ntake = POOL.acquire\ntake(spec)",
    "a pool's method by getattr": (
        "from pear_agent.loop.runner import POOL\ngetattr(POOL, 'release')(spec, env)"
    ),
    "the pool's builder aliased": (
        "from pear_agent.loop.registry import make_spec_environment as mk\nmk(spec)"
    ),
    "the pool's builder by module": "import pear_agent.loop.registry as r\nr.make_spec_environment(spec)",
}
"""Ways a second runner could hide from a scan by names (`Episode(`, `pool.acquire`): each is a
module `pear_agent.bench.sneaky` of its own."""

INNOCENT = {
    "a lock's acquire": "import threading\nlock = threading.Lock()\nlock.acquire()\nlock.release()",
    "a semaphore named pool": "import asyncio\npool = asyncio.Semaphore(2)\npool.release()",
    "an isinstance check": "from pear_agent.loop.episode import Episode\nok = isinstance(x, Episode)",
    "the runner called with the pool": (
        "from pear_agent.loop.runner import POOL, arun_episode\nPOOL.in_flight(4)\narun_episode(job, POOL)"
    ),
    "a config built": "from pear_agent.loop.config import EpisodeConfig as C\nC()",
}
"""What the scan must not flag: other things named like the runner's parts."""


@pytest.mark.parametrize("how", list(EVASIONS))
def test_the_scan_sees_through_aliases_and_other_names(how: str) -> None:
    """The scan by names missed `Episode as E`, `episode.Episode(` and pools whose
    variable is not named `pool`; by the import graph each is caught."""
    found = offenders({"pear_agent.bench.sneaky": (EVASIONS[how], False)})
    assert len(found) == 1 and found[0].startswith("pear_agent.bench.sneaky:"), (how, found)


@pytest.mark.parametrize("how", list(INNOCENT))
def test_the_scan_leaves_other_things_alone(how: str) -> None:
    assert offenders({"pear_agent.bench.sneaky": (INNOCENT[how], False)}) == [], how


def test_bench_rollouts_and_trainer_all_go_through_arun_episode(tmp_path, monkeypatch) -> None:
    import pear_agent.bench.runner as bench_runner
    import pear_agent.loop.runner as episodes
    from pear_agent.bench.runner import run_job
    from pear_agent.loop.config import EpisodeConfig
    from pear_agent.rl import rollouts
    from pear_agent.rl.rollouts import PolicySpec, RolloutJob, run_rollout
    from pear_agent.train.episodes import TrainJob, run_episodes
    from sim_adapters.roadster.pilot import PilotPolicy

    seen: list[str] = []
    real = episodes.arun_episode

    async def counting(job, pool=episodes.POOL):
        out = await real(job, pool)
        seen.append(job.environment.task)
        return out

    monkeypatch.setattr(episodes, "arun_episode", counting)
    monkeypatch.setattr(rollouts, "arun_episode", counting)  # imported by name there
    monkeypatch.setattr(bench_runner, "arun_episode", counting)  # and there
    task = "roadster_ramp_flip:light"
    line = run_job({"task": task, "seed": 3, "out_dir": str(tmp_path), "policy": {"kind": "scripted"},
                    "video": False, "render": False})  # fmt: skip
    rec = run_rollout(RolloutJob(task, 3, PolicySpec("scripted", pilot_noise=0.0), render=False))
    (tr,) = run_episodes(
        [TrainJob(task, 3)], lambda job: PilotPolicy(), EpisodeConfig(observation="state"), policy_version=7
    )
    assert seen == [task, task, task]
    # the same initial state and deterministic pilot: the same episode through all three callers
    assert line["success"] == rec["success"] == tr["success"]
    assert line["turns"] == rec["turns"] == tr["turns"]
    assert rec["shaped_reward"] == pytest.approx(tr["shaped_reward"], abs=1e-12)
    assert rec["messages"] == tr["messages"]
    assert len(tr["turn_tokens"]) == tr["turns"]  # one trace slot per reply (None: no ids)


def test_rewards_are_read_before_the_environment_goes_back_to_the_pool() -> None:
    """The runner reads the family's rewards while the episode still holds its environment: a pool
    that resets an environment the moment it is released changes nothing in the outcome."""
    from pear_agent.loop.config import EpisodeConfig
    from pear_agent.loop.registry import EnvSpec
    from pear_agent.loop.runner import EnvironmentPool, EpisodeJob, run_episodes
    from sim_adapters.roadster.pilot import PilotPolicy

    class Wiping(EnvironmentPool):
        def release(self, spec, env):
            env.reset(12345)  # another episode's initial state, as a reused environment gets
            super().release(spec, env)

    spec = EnvSpec.of("roadster_ramp_flip:light", render=False, config=EpisodeConfig())
    jobs = [EpisodeJob(spec, PilotPolicy(), seed=3)]
    plain = run_episodes(jobs, pool=EnvironmentPool())[0]
    wiped = run_episodes(jobs, pool=Wiping())[0]
    assert plain.error is None and plain.shaped_reward is not None
    assert wiped.shaped_reward == plain.shaped_reward and wiped.reward == plain.reward
