"""The whole stack without hardware: the MuJoCo robot node behind ros2_control's topics, and the
agent node driving it.

    ros2 launch pear_agent_ros2 yam_sim.launch.py
    ros2 launch pear_agent_ros2 yam_sim.launch.py sim_params:=my_sim.yaml agent_params:=my_agent.yaml
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
            DeclareLaunchArgument("sim_params", default_value=str(CONFIG / "sim_robot.yaml")),
            DeclareLaunchArgument("agent_params", default_value=str(CONFIG / "agent_sim.yaml")),
            Node(
                package="pear_agent_ros2",
                executable="sim_robot_node",
                name="pear_sim_robot",
                parameters=[LaunchConfiguration("sim_params")],
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
