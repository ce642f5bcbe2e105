"""The agent against a real dual-arm YAM: its ros2_control stack (a joint_trajectory_controller
per arm and per gripper, joint_state_broadcaster) and camera drivers must already be running.

    ros2 launch pear_agent_ros2 yam_real.launch.py agent_params:=/path/to/agent_real.yaml
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
            DeclareLaunchArgument("agent_params", default_value=str(CONFIG / "agent_real.yaml")),
            Node(
                package="pear_agent_ros2",
                executable="agent_node",
                name="pear_agent",
                parameters=[LaunchConfiguration("agent_params")],
                output="screen",
            ),
        ]
    )
