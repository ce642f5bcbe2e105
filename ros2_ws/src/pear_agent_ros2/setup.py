"""ament_python package exposing pear-agent's ROS 2 nodes; the runtime itself is the `pear-agent`
Python package, installed into the same Python (pip install -e <repo>[sim,ros2] or plain pip)."""

from glob import glob

from setuptools import setup

PACKAGE = "pear_agent_ros2"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/launch/config", glob("launch/config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="pear-agent maintainers",
    maintainer_email="maintainers@pear-agent.invalid",
    description="pear-agent ROS 2 nodes: agent_node, sim_robot_node and yam_driver_node",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "agent_node = pear_agent_ros2.agent_node:main",
            "sim_robot_node = pear_agent_ros2.sim_robot_node:main",
            "yam_driver_node = pear_agent_ros2.yam_driver_node:main",
        ],
    },
)
