"""`ros2 run pear_agent_ros2 yam_driver_node`: see pear_agent.ros2.yam_driver_node."""

import sys

from pear_agent.ros2.yam_driver_node import main as _main


def main() -> None:
    sys.exit(_main())
