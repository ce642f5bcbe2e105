"""The real-YAM graph on a laptop: yam_real.launch.py with `sim:=true`, so both yam_driver_node
processes run I2RT's MuJoCo SimRobot (no CAN) behind the same topics and parameters, with the agent.

    ros2 launch pear_agent_ros2 yam_i2rt_sim.launch.py
    ros2 launch pear_agent_ros2 yam_i2rt_sim.launch.py agent_params:=/path/to/agent.yaml cameras:=true

I2RT's SimRobot has no table, objects or cameras: the agent gets the arms' joint states, and its
images from whatever publishes the robot YAML's camera topics (`cameras:=true` starts the RealSense
nodes as on the real robot; any other image publisher remapped to those topics does too).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "config"


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument("driver_params", default_value=str(CONFIG / "yam_driver.yaml")),
            DeclareLaunchArgument("agent_params", default_value=str(CONFIG / "agent_real.yaml")),
            DeclareLaunchArgument("cameras", default_value="false"),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(str(HERE / "yam_real.launch.py")),
                launch_arguments={
                    "sim": "true",
                    "driver_params": LaunchConfiguration("driver_params"),
                    "agent_params": LaunchConfiguration("agent_params"),
                    "cameras": LaunchConfiguration("cameras"),
                }.items(),
            ),
        ]
    )
