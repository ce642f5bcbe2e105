"""The YAM driver's packaging, without colcon or `launch` (not installable from PyPI here): the
colcon entry point, the launch files' nodes, remaps and parameter files (parsed, every parameter one
the node declares), and the install path of its dependencies."""

from __future__ import annotations

import ast
from configparser import ConfigParser
from pathlib import Path

import yaml

from pear_agent.robot.loader import load_robot
from pear_agent.ros2 import agent_node, yam_driver_node

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "ros2_ws" / "src" / "pear_agent_ros2"
LAUNCH = REPO / "launch"


def _calls(path: Path, name: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == name]


def _kw(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _defaults(path: Path) -> dict[str, str]:
    """DeclareLaunchArgument name -> default (file names under config/ resolved to paths)."""
    out = {}
    for call in _calls(path, "DeclareLaunchArgument"):
        if not isinstance(call.args[0], ast.Constant):
            continue  # the camera serial arguments, declared in a loop
        name = call.args[0].value
        default = _kw(call)["default_value"]
        if isinstance(default, ast.Call):  # str(CONFIG / "file.yaml")
            out[name] = str(LAUNCH / "config" / ast.literal_eval(default.args[0].right))
        elif isinstance(default, ast.Constant):
            out[name] = default.value
    return out


def test_colcon_entry_point_runs_the_driver_main() -> None:
    setup = (PKG / "setup.py").read_text()
    assert '"yam_driver_node = pear_agent_ros2.yam_driver_node:main"' in setup
    wrapper = (PKG / "pear_agent_ros2" / "yam_driver_node.py").read_text()
    assert "from pear_agent.ros2.yam_driver_node import main as _main" in wrapper
    assert "def main(" in wrapper
    assert callable(yam_driver_node.main)
    assert "<exec_depend>diagnostic_msgs</exec_depend>" in (PKG / "package.xml").read_text()


def test_real_launch_starts_one_driver_per_arm_cameras_and_the_agent() -> None:
    path = LAUNCH / "yam_real.launch.py"
    defaults = _defaults(path)
    nodes = [_kw(c) for c in _calls(path, "Node")]
    drivers = [n for n in nodes if ast.literal_eval(n["package"]) == "pear_agent_ros2"]
    by_exe: dict[str, list[dict]] = {}
    for n in drivers:
        by_exe.setdefault(ast.literal_eval(n["executable"]), []).append(n)
    assert set(by_exe) == {"yam_driver_node", "agent_node"}
    arms = {}
    for n in by_exe["yam_driver_node"]:
        params = n["parameters"].elts
        assert ast.literal_eval(params[0].args[0]) == "driver_params"
        override = params[1]
        keys = [ast.literal_eval(k) for k in override.keys]
        arms[ast.literal_eval(n["name"])] = ast.literal_eval(override.values[keys.index("arm")])
        assert "sim" in keys  # the sim launch argument reaches both drivers
    assert arms == {"yam_left_driver": "left_arm", "yam_right_driver": "right_arm"}
    robot = load_robot("yam_bimanual")
    assert set(arms.values()) == set(robot.parts)
    # driver parameters: the `/**` block every driver reads, all declared by the node
    driver_yaml = yaml.safe_load(Path(defaults["driver_params"]).read_text())
    assert set(driver_yaml) == {"/**"}
    params = driver_yaml["/**"]["ros__parameters"]
    assert set(params) <= set(yam_driver_node.PARAMS), set(params) - set(yam_driver_node.PARAMS)
    assert params["sim"] is False  # a real launch talks to CAN unless told otherwise
    assert params["can_left"] != params["can_right"]
    # agent parameters: declared by agent_node
    agent = by_exe["agent_node"][0]
    agent_file = Path(defaults[ast.literal_eval(agent["parameters"].elts[0].args[0])])
    agent_params = yaml.safe_load(agent_file.read_text())["pear_agent"]["ros__parameters"]
    assert set(agent_params) <= set(agent_node.PARAMS)
    # cameras: their own driver, remapped onto the robot YAML's topics, only with cameras:=true
    source = path.read_text()
    assert 'package="realsense2_camera"' in source and 'IfCondition(LaunchConfiguration("cameras"))' in source
    namespace = "cameras"
    for name, cam in robot.cameras.items():
        assert cam.topic == f"/{namespace}/{name}/image_raw", "the launch file's remap assumes this layout"
    assert 'remappings=[(f"/cameras/{name}/color/image_raw", f"/cameras/{name}/image_raw")]' in source


def test_i2rt_sim_launch_is_the_real_graph_with_sim_true() -> None:
    path = LAUNCH / "yam_i2rt_sim.launch.py"
    includes = _calls(path, "IncludeLaunchDescription")
    assert len(includes) == 1
    source = path.read_text()
    assert '"yam_real.launch.py"' in source
    assert '"sim": "true"' in source
    defaults = _defaults(path)
    assert Path(defaults["driver_params"]).is_file() and Path(defaults["agent_params"]).is_file()


def test_the_yam_extra_brings_the_drivers_dependencies_and_dev_setup_installs_it() -> None:
    cfg = ConfigParser()
    cfg.read(REPO / "setup.cfg")
    extra = cfg["options.extras_require"]["yam"]
    for dep in ("dreamscale-i2rt", "ruckig", "ros-kilted-diagnostic-msgs"):
        assert dep in extra
    setup_sh = (REPO / "scripts" / "setup.sh").read_text()
    dev_line = next(x for x in setup_sh.splitlines() if x.strip().startswith("--dev)"))
    assert "yam" in dev_line
