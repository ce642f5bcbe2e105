"""The ament_python package's metadata: package.xml, setup.py, setup.cfg, the resource marker, the
entry points (importable, with a `main`), and the launch files (they name executables the package
installs and parameter files that exist and hold parameters the nodes declare). The package is also
built with colcon from PyPI and run from its install space: test_desk_graph.py.
"""

from __future__ import annotations

import ast
import importlib
import xml.etree.ElementTree as ET
from configparser import ConfigParser
from pathlib import Path

import yaml

from pear_agent.ros2 import agent_node, sim_robot_node, yam_driver_node

REPO = Path(__file__).resolve().parents[2]
PKG_DIR = REPO / "ros2_ws" / "src" / "pear_agent_ros2"
LAUNCH_DIR = REPO / "launch"


def _setup_kwargs() -> dict:
    tree = ast.parse((PKG_DIR / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    consts = {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
    }
    out = {}
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name):
            out[kw.arg] = consts[kw.value.id]
        elif kw.arg == "packages":
            out[kw.arg] = [
                consts[e.id] if isinstance(e, ast.Name) else ast.literal_eval(e) for e in kw.value.elts
            ]
        elif kw.arg in ("entry_points", "version", "license"):
            out[kw.arg] = ast.literal_eval(kw.value)
    return out


def _package_xml() -> ET.Element:
    return ET.parse(PKG_DIR / "package.xml").getroot()


def test_package_xml_matches_setup() -> None:
    root = _package_xml()
    kw = _setup_kwargs()
    name = root.findtext("name")
    assert root.get("format") == "3"
    assert name == kw["name"] == "pear_agent_ros2"
    assert root.findtext("version") == kw["version"]
    assert root.findtext("license") == kw["license"]
    assert root.find("export/build_type").text == "ament_python"
    deps = {e.text for e in root.iter() if e.tag.endswith("depend")}
    assert {"rclpy", "std_msgs", "std_srvs", "sensor_msgs", "trajectory_msgs", "launch", "launch_ros"} <= deps
    assert kw["packages"] == [name] and (PKG_DIR / name / "__init__.py").is_file()
    assert (PKG_DIR / "resource" / name).is_file()  # the ament index marker
    cfg = ConfigParser()
    cfg.read(PKG_DIR / "setup.cfg")
    assert cfg["develop"]["script_dir"] == cfg["install"]["install_scripts"] == f"$base/lib/{name}"


def _executables() -> dict[str, str]:
    scripts = _setup_kwargs()["entry_points"]["console_scripts"]
    return dict(s.replace(" ", "").split("=") for s in scripts)


def test_entry_points_resolve_to_the_nodes() -> None:
    exes = _executables()
    assert set(exes) == {"agent_node", "sim_robot_node", "yam_driver_node"}
    for target in exes.values():
        module, func = target.split(":")
        assert (PKG_DIR / (module.replace(".", "/") + ".py")).is_file()
        src = (PKG_DIR / (module.replace(".", "/") + ".py")).read_text()
        assert f"def {func}(" in src
    # the wrappers call into pear_agent.ros2, whose mains exist (rclpy is imported inside them)
    assert callable(agent_node.main) and callable(sim_robot_node.main)
    for mod in (
        "pear_agent.ros2.agent_node",
        "pear_agent.ros2.sim_robot_node",
        "pear_agent.ros2.yam_driver_node",
    ):
        assert callable(importlib.import_module(mod).main)


def _launch_nodes(path: Path) -> tuple[list[dict], dict[str, str]]:
    """This package's Node(...) calls (other packages' nodes, e.g. camera drivers, are skipped) and
    the launch arguments whose default is a file under launch/config."""
    tree = ast.parse(path.read_text())
    nodes, args = [], {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        fname = getattr(call.func, "id", "")
        kws = {k.arg: k.value for k in call.keywords}
        if fname == "Node":
            package = kws["package"]
            if not (isinstance(package, ast.Constant) and package.value == "pear_agent_ros2"):
                continue
            nodes.append(
                {
                    "package": ast.literal_eval(package),
                    "executable": ast.literal_eval(kws["executable"]),
                    "name": ast.literal_eval(kws["name"]),
                    "param_arg": ast.literal_eval(kws["parameters"].elts[0].args[0]),
                }
            )
        if fname == "DeclareLaunchArgument":
            default = kws.get("default_value")  # str(CONFIG / "<file>") for parameter files
            right = (
                getattr(getattr(default, "args", [None])[0], "right", None) if default is not None else None
            )
            if isinstance(right, ast.Constant):
                args[ast.literal_eval(call.args[0])] = right.value
    return nodes, args


def test_launch_files_reference_executables_and_parameter_files() -> None:
    setup = _setup_kwargs()
    exes = _executables()
    assert (PKG_DIR / "launch").resolve() == LAUNCH_DIR.resolve()  # installed via data_files globs
    data = (PKG_DIR / "setup.py").read_text()
    assert 'glob("launch/*.launch.py")' in data and 'glob("launch/config/*.yaml")' in data
    declared = {
        "agent_node": set(agent_node.PARAMS),
        "sim_robot_node": set(sim_robot_node.PARAMS),
        "yam_driver_node": set(yam_driver_node.PARAMS),
    }
    files = sorted(LAUNCH_DIR.glob("*.launch.py"))
    assert {f.name for f in files} == {"yam_real.launch.py", "yam_sim.launch.py", "yam_i2rt_sim.launch.py"}
    for f in files:
        nodes, args = _launch_nodes(f)
        assert nodes or "IncludeLaunchDescription" in f.read_text(), f"{f.name}: no Node and no include"
        for node in nodes:
            assert node["package"] == setup["name"]
            assert node["executable"] in exes, f"{f.name}: unknown executable {node['executable']}"
            params_file = LAUNCH_DIR / "config" / args[node["param_arg"]]
            assert params_file.is_file(), f"{f.name}: {params_file} missing"
            params = yaml.safe_load(params_file.read_text())
            (key,) = set(params)
            assert key in (node["name"], "/**"), f"{params_file.name}: top key must be the node name or /**"
            unknown = set(params[key]["ros__parameters"]) - declared[node["executable"]]
            assert not unknown, f"{params_file.name}: parameters the node does not declare: {unknown}"


def test_colcon_comes_from_an_extra_that_dev_setup_installs() -> None:
    cfg = ConfigParser()
    cfg.read(REPO / "setup.cfg")
    extra = cfg["options.extras_require"]["colcon"]
    for dep in (
        "colcon-core",
        "colcon-ros",
        "colcon-python-setup-py",
        "colcon-bash",
        "ros-kilted-ament-package",
    ):
        assert dep in extra, dep
    setup_sh = (REPO / "scripts" / "setup.sh").read_text()
    dev_line = next(x for x in setup_sh.splitlines() if x.strip().startswith("--dev)"))
    assert "colcon" in dev_line
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert {"build/", "ros2_ws/install/", "ros2_ws/log/"} <= set(ignored)  # what colcon build writes
