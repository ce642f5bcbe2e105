"""The real-YAM graph on a laptop: both yam_driver_node processes on I2RT's MuJoCo SimRobot (no CAN,
no cameras) and the agent, with the same topics and parameters as yam_real.launch.py.

    ros2 launch pear_agent_ros2 yam_i2rt_sim.launch.py
    ros2 launch pear_agent_ros2 yam_i2rt_sim.launch.py agent_params:=/path/to/agent_real.yaml

I2RT's SimRobot has no table, objects or cameras: the agent gets joint states only (give it
`wait_for_images_s: 0` or a camera source) and no task status, like on the real robot.
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

CONFIG = Path(__file__).resolve().parent / "config"


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument("driver_params", default_value=str(CONFIG / "yam_driver.yaml")),
            DeclareLaunchArgument("agent_params", default_value=str(CONFIG / "agent_real.yaml")),
            Node(
                package="pear_agent_ros2",
                executable="yam_driver_node",
                name="yam_left_driver",
                parameters=[LaunchConfiguration("driver_params"), {"arm": "left_arm", "sim": True}],
                output="screen",
            ),
            Node(
                package="pear_agent_ros2",
                executable="yam_driver_node",
                name="yam_right_driver",
                parameters=[LaunchConfiguration("driver_params"), {"arm": "right_arm", "sim": True}],
                output="screen",
            ),
            Node(
                package="pear_agent_ros2",
                executable="agent_node",
                name="pear_agent",
                parameters=[LaunchConfiguration("agent_params")],
                output="screen",
            ),
        ]
    )
