"""`ros2 run pear_agent_ros2 agent_node`: see pear_agent.ros2.agent_node."""

import sys

from pear_agent.ros2.agent_node import main as _main


def main() -> None:
    sys.exit(_main())
