"""The one registry of environment families: every family's tasks by one path, a family registered
by its package metadata (a real entry point, in a subprocess) runs through `run` and `bench`
untouched, and no adapter module is imported by `pear_agent/` except through the registry."""

import ast
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from pear_agent.loop import registry
from pear_agent.loop.registry import EnvSpec, UnknownNameError

REPO = Path(__file__).resolve().parents[2]

TINY_FAMILY = '''
"""A family outside the repository: reach x = goal on a line, one step a turn."""
import json
from dataclasses import dataclass

from pear_agent.robot.backend import TaskInfo
from pear_agent.loop.environment import StepResult, TurnPrompt
from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.actions import ActionError
from pear_agent.loop.registry import Family
from pear_agent.settings import setting


class Step:
    done = False

    def __init__(self, n):
        self.n = n

    def to_json(self):
        return {"step": self.n}


class LineWorld:
    name = "line"

    def __init__(self, goal):
        self.goal, self.x, self.t = goal, 0, 0.0
        self._task = TaskInfo("tiny_reach", f"Reach x = {goal}.", 10)

    @property
    def task(self):
        return self._task

    def reset(self, seed):
        self.x, self.t = 0, 0.0

    def system_prompt(self):
        return 'Reply {"step": 1} to move right.'

    def header(self):
        return {"observation": "text", "goal": self.goal}

    def observe(self, turn, max_turns, feedback):
        text = f"x = {self.x}"
        ctx = TurnContext(turn, "tiny_reach", {"x": self.x}, None)
        return TurnPrompt({"role": "user", "content": text}, text, ctx, 4)

    def response_schema(self):
        return {"type": "object"}

    def parse(self, reply):
        try:
            return Step(int(json.loads(reply)["step"]))
        except (ValueError, KeyError, TypeError):
            raise ActionError('expected {"step": n}') from None

    def execute(self, action):
        self.x += action.n
        self.t += 1.0
        won = self.x >= self.goal
        return StepResult("moved", f"x is {self.x}", f"step {action.n:+d}", won, {"x": self.x})

    def advance(self, duration_s):
        self.t += duration_s

    def time_s(self):
        return self.t

    def set_frame_sink(self, sink):
        pass

    def judge_success(self, end_reason, detail):
        return None

    def result_fields(self):
        return {"final_x": self.x}


class Walker:
    name = "walker"
    blocking = False

    def reset(self, seed):
        pass

    def act(self, messages, ctx):
        return PolicyReply('{"step": 1}')


@dataclass
class TinyOptions:
    tiny_goal: int = setting(3, help="tiny: where the goal is")


class TinyFamily(Family):
    name = "tiny"
    options_type = TinyOptions

    def task_names(self):
        return ["tiny_reach"]

    def options(self, args):
        return {"goal": self.parse(args).tiny_goal}

    def make(self, spec):
        return LineWorld(spec.option("goal", 3))

    def has_default_policy(self, task):
        return True

    def default_policy(self, task, **kw):
        return Walker()


FAMILY = TinyFamily()
'''


def _install_tiny(site: Path, broken: bool = False) -> None:
    """A package and its metadata, as pip would leave them (entry point group pear_agent.families)."""
    (site / "tiny_family").mkdir(parents=True)
    (site / "tiny_family" / "__init__.py").write_text(TINY_FAMILY)
    info = site / "tiny_family-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-family\nVersion: 0.1\n")
    eps = "[pear_agent.families]\ntiny = tiny_family:FAMILY\n"
    if broken:
        eps += "broken = tiny_family:NO_SUCH_FAMILY\n"
    (info / "entry_points.txt").write_text(eps)


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.wallclock  # bench spreads its episodes over worker processes
def test_a_family_registered_by_entry_point_runs_through_run_and_bench(tmp_path) -> None:
    site = tmp_path / "site"
    _install_tiny(site, broken=True)
    p = _cli(
        site, "run", "--task", "tiny_reach", "--tiny-goal", "4", "--json", "--runs-dir", str(tmp_path / "r")
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["success"] and summary["turns"] == 4 and summary["policy"] == "walker"
    assert summary["robot"] == "line" and summary["final_x"] == 4  # the family's own result fields
    # a broken registration is one warning; the other families still load
    assert "environment family 'broken' could not be loaded" in p.stderr and "Traceback" not in p.stderr

    out = tmp_path / "bench"
    b = _cli(site, "bench", "--tasks", "tiny_reach,pick_cube", "--seeds", "0-3", "--tiny-goal", "2",
             "--workers", "2", "--concurrency", "3", "--no-video", "--quiet", "--out", str(out))  # fmt: skip
    assert b.returncode == 0, b.stderr[-2000:]
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    tiny = [x for x in lines if x["task"] == "tiny_reach"]
    assert sorted(x["seed"] for x in tiny) == [0, 1, 2, 3]  # each once, in the spawned workers too
    assert all(x["success"] and x["turns"] == 2 and x["final_x"] == 2 for x in tiny)
    assert sum(x["success"] for x in lines if x["task"] == "pick_cube") == 4
    config = json.loads((out / "bench.json").read_text())
    assert config["identity"]["options"] == {"goal": 2}  # a resume must match the family's options

    p = _cli(site, "run", "--task", "nope")
    assert p.returncode == 2 and "unknown task 'nope'" in p.stderr and "tiny_reach" in p.stderr


def test_every_family_is_found_and_names_its_tasks() -> None:
    fams = registry.families()
    assert {"mujoco", "libero", "roadster", "metaworld"} <= set(fams)
    assert registry.family_of("pick_cube").name == "mujoco"
    assert registry.family_of("libero_spatial/0").name == "libero"
    assert registry.family_of("roadster_kickflip:storm").name == "roadster"
    with pytest.raises(
        UnknownNameError, match=r"unknown task 'fly'; tasks are: .*pick_cube.*roadster_kickflip"
    ):
        registry.family_of("fly")
    assert registry.resolve("roadster_kickflip", {"wind": "gale"})[1] == "roadster_kickflip:gale"
    assert registry.resolve("roadster_kickflip:storm", {"wind": "gale"})[1] == "roadster_kickflip:storm"
    with pytest.raises(ValueError, match="unknown wind band 'breeze'"):
        registry.resolve("roadster_kickflip:breeze")
    # the arm tasks' table as `robots --check` and the ROS 2 sim node read it
    assert registry.arm_tasks()["bimanual_pickup"].default_robot == "yam_bimanual"
    assert registry.task_entry("libero_goal/3").backend == "libero"
    with pytest.raises(UnknownNameError, match="not an arm task"):
        registry.task_entry("roadster_kickflip")


def test_the_roadster_family_names_the_environments_tasks() -> None:
    pytest.importorskip("mujoco")
    from sim_adapters.roadster import environment, family

    assert family.TASKS == environment.TASKS


def test_env_specs_travel_to_workers_and_key_the_pool() -> None:
    from pear_agent.loop.config import EpisodeConfig

    a = EnvSpec.of("pick_cube", {"robot": "ur5e", "unused": None}, config=EpisodeConfig(observation="state"))
    b = pickle.loads(pickle.dumps(a))
    assert a == b and hash(a) == hash(b) and a.option("robot") == "ur5e" and a.loop.observation == "state"
    assert a.options == (("robot", "ur5e"),)
    assert EnvSpec.of("pick_cube", render=False) != EnvSpec.of("pick_cube")


def test_make_environment_builds_any_familys_task() -> None:
    pytest.importorskip("mujoco")
    env = registry.make_environment("roadster_ramp_flip", wind="storm", render=False)
    try:
        env.reset(3)
        assert env.task.name == "roadster_ramp_flip:storm" and "stunt: ramp_flip" in env.system_prompt()
    finally:
        registry.close_environment(env)
    env = registry.make_environment("pick_cube", robot="ur5e", render=False)
    try:
        env.reset(0)
        assert env.name == "ur5e" and env.observe(1, 5, None).images == {}
    finally:
        registry.close_environment(env)
    with pytest.raises(UnknownNameError, match="cannot do task 'bimanual_pickup'"):
        registry.make_environment("bimanual_pickup", robot="panda")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_no_adapter_module_is_imported_by_pear_agent_except_through_the_registry() -> None:
    offenders = {}
    for path in sorted((REPO / "pear_agent").rglob("*.py")):
        rel = path.relative_to(REPO / "pear_agent").as_posix()
        bad = [n for n in _imports(path) if n == "sim_adapters" or n.startswith("sim_adapters.")]
        if bad:
            offenders[rel] = bad
    assert offenders == {}
    # the loop's modules import no simulator, LIBERO or ROS at all (not even lazily)
    heavy = ("mujoco", "libero", "robosuite", "rclpy")
    for name in (
        "loop/episode.py",
        "loop/runner.py",
        "loop/environment.py",
        "loop/workers.py",
        "loop/registry.py",
        "loop/arm_family.py",
    ):
        mods = _imports(REPO / "pear_agent" / name)
        assert not [m for m in mods if m.split(".")[0] in heavy], name


def test_loading_the_families_imports_no_simulator_and_no_cli() -> None:
    """The old circle (registry -> roadster's CLI -> pear_agent.cli) is gone, and listing tasks is
    cheap: no MuJoCo, no LIBERO until an environment is built."""
    code = (
        "import sys; from pear_agent.loop import registry; names = registry.task_names(); "
        "bad = [m for m in ('mujoco', 'libero', 'robosuite', 'pear_agent.cli', 'sim_adapters.roadster.sim') "
        "if m in sys.modules]; print(len(names), bad)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    count, bad = p.stdout.split(" ", 1)
    assert int(count) >= 48 and bad.strip() == "[]"


def test_tasks_lists_every_family_and_an_unknown_task_is_one_short_line(capsys) -> None:
    from pear_agent.cli import main

    assert main(["tasks", "--count"]) == 0
    counts = dict(line.split(": ") for line in capsys.readouterr().out.splitlines())
    libero = len(registry.families()["libero"].task_names())
    mujoco = registry.families()["mujoco"].task_names()  # its classes, then one per object YAML
    assert sum(t.startswith("pick_up_object/") for t in mujoco) >= 10
    assert counts["mujoco"] == f"{len(mujoco)} tasks"
    assert counts["libero"] == f"{libero} tasks" and libero >= 200
    assert main(["tasks", "libero_goal/3", "--family", "libero"]) == 0
    listed = capsys.readouterr().out.split()
    assert "libero_goal/3" in listed and "libero_pro/swap/libero_goal/3" in listed
    assert all("libero_goal/3" in t for t in listed)
    assert main(["tasks", "--family", "nope"]) == 2
    assert "unknown family 'nope'; families are: mujoco" in capsys.readouterr().err
    with pytest.raises(UnknownNameError) as err:
        registry.family_of("fly")
    message = str(err.value)
    # LIBERO's many names are summarised by count, the small families named in full
    assert f"({libero} libero tasks: pear-agent tasks --family libero)" in message
    assert "(50 metaworld tasks: pear-agent tasks --family metaworld)" in message
    assert "align_blocks" in message and "roadster_kickflip" in message and len(message) < 700


def test_a_family_with_only_the_required_hooks_gets_every_optional_parts_default() -> None:
    """The tiny family subclasses the slim `Family` and implements no optional part: every caller's
    fallback answers for it (the run above printed its turn lines and recorded its result fields)."""
    from types import SimpleNamespace

    from pear_agent.loop import family_parts
    from pear_agent.loop.episode import EpisodeResult

    ns: dict = {}
    exec(compile(TINY_FAMILY, "tiny_family", "exec"), ns)
    tiny = ns["FAMILY"]
    assert family_parts.parts_of(tiny) == []
    env = tiny.make(EnvSpec.of("tiny_reach", {"goal": 2}))
    env.reset(0)
    args = SimpleNamespace(tiny_goal=2)
    assert family_parts.select(tiny, args, model=False) is None
    assert family_parts.bench_summary(tiny, [], None, args) is None
    assert family_parts.result_fields(tiny, env) == {"final_x": 0}  # the environment's own
    assert family_parts.report_html(tiny, []) == ""
    assert family_parts.prompt_schema(tiny, env) == ("reply schema", {"type": "object"})
    assert family_parts.text_expert(tiny, [{"role": "user", "content": "x = 0"}]) is None
    won = EpisodeResult(success=True, turns=2, end_reason="success")
    assert family_parts.rewards(tiny, env, won) == (1.0, None)
    won.reward = 0.25  # an environment's own last reward is kept, shaped too
    assert family_parts.rewards(tiny, env, won) == (0.25, 0.25)
    with pytest.raises(ValueError, match=r"task 'tiny_reach' has no scenario filters .*'tiny'"):
        family_parts.filtered_seeds(tiny, "tiny_reach", "slow_approach", 0, 10, 1)


def test_the_repositorys_families_declare_the_optional_parts_they_implement() -> None:
    from pear_agent.loop import family_parts

    fams = registry.families()
    assert family_parts.parts_of(fams["mujoco"]) == ["PromptSchema", "RlRewards", "RobotCheck"]
    libero = ["BenchSelection", "BenchSummary", "PromptSchema", "RlRewards"]
    assert family_parts.parts_of(fams["libero"]) == libero
    roadster = {"ReportPage", "TurnLines", "PromptSchema", "RlRewards", "ScenarioFilters", "TextServing"}
    assert set(family_parts.parts_of(fams["roadster"])) == roadster
    # a part is declared by subclassing its protocol, so a misspelt method is caught here
    for fam in fams.values():
        for part in family_parts.PARTS:
            if issubclass(type(fam), part):
                (method,) = [m for m in vars(part) if not m.startswith("_")]
                assert getattr(type(fam), method) is not getattr(part, method), (fam.name, part.__name__)
    # the slim core: only what every family answers
    hooks = {m for m in vars(registry.Family) if not m.startswith("_") and callable(vars(registry.Family)[m])}
    assert hooks == {
        "task_names", "owns", "add_arguments", "parse", "options", "bench_options", "resolve", "expand",
        "make", "has_default_policy", "default_policy", "describe", "verdict",
    }  # fmt: skip


def test_the_environment_options_are_the_loops_the_specs_and_the_arm_environments() -> None:
    """One list says which loop options build an environment: the spec, the loop's config and the
    arm environment's keywords all have exactly these names."""
    import dataclasses
    import inspect

    from pear_agent.loop.arm_environment import ArmEnvironment
    from pear_agent.loop.config import EpisodeConfig
    from pear_agent.loop.environment import ENVIRONMENT_OPTIONS, environment_options

    names = set(ENVIRONMENT_OPTIONS)
    assert names <= {f.name for f in dataclasses.fields(EpisodeConfig)}
    keywords = inspect.signature(ArmEnvironment.__init__).parameters.values()
    assert names == {p.name for p in keywords if p.kind is inspect.Parameter.KEYWORD_ONLY}
    config = EpisodeConfig(observation="state", max_invalid=2, max_chunk=4)
    spec = EnvSpec.of("pick_cube", config=config)
    assert environment_options(spec.loop) == environment_options(config)
    assert (spec.loop.observation, spec.loop.max_invalid, spec.loop.max_chunk) == ("state", 2, 4)
    assert EnvSpec.of("pick_cube", config=dataclasses.replace(config, history=3)) == spec  # not a pool key
