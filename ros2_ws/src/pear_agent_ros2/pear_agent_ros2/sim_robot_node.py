"""`ros2 run pear_agent_ros2 sim_robot_node`: see pear_agent.ros2.sim_robot_node."""

import sys

from pear_agent.ros2.sim_robot_node import main as _main


def main() -> None:
    sys.exit(_main())
