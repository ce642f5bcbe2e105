"""The desk graph: the real-YAM graph (yam_real.launch.py) with `sim:=true`, so both yam_driver_node
processes run I2RT's MuJoCo SimRobot (no CAN) behind the same topics and parameters, and the agent
with config/agent_i2rt_sim.yaml: no cameras (the model is told so), the bring-up motion as policy.

    ros2 launch pear_agent_ros2 yam_i2rt_sim.launch.py
    pear-agent ros instruct "Raise both arms and lower them again."     # then: pear-agent ros judge yes

The same graph as plain modules (no `ros2 launch`) is in docs/yam-driver.md ("The desk graph"), which
the tests run verbatim. I2RT's SimRobot has no table, objects or cameras; with real cameras on the
desk, `cameras:=true agent_params:=<a file with observation: both>` starts the RealSense nodes.
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
            DeclareLaunchArgument("agent_params", default_value=str(CONFIG / "agent_i2rt_sim.yaml")),
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
