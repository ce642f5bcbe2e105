"""A real dual-arm I2RT YAM: one yam_driver_node per arm (I2RT's driver over CAN, stock
joint_trajectory_controller topics), optional RealSense cameras remapped to the robot YAML's camera
topics, and the agent.

    ros2 launch pear_agent_ros2 yam_real.launch.py
    ros2 launch pear_agent_ros2 yam_real.launch.py agent_params:=/path/to/agent_real.yaml \
        cameras:=true top_serial:="'123456789012'" left_wrist_serial:="'...'" right_wrist_serial:="'...'"

`sim:=true` runs the same graph on I2RT's MuJoCo SimRobot (see yam_i2rt_sim.launch.py).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription

CONFIG = Path(__file__).resolve().parent / "config"
CAMERAS = {"top": "top_serial", "left_wrist": "left_wrist_serial", "right_wrist": "right_wrist_serial"}
"""camera name in robots/yam_bimanual.yaml -> launch argument with its RealSense serial number"""


def _camera(name: str, serial_arg: str) -> Node:
    # realsense2_camera publishes /<namespace>/<name>/color/image_raw; the agent reads the YAML's topic
    return Node(
        package="realsense2_camera",
        executable="realsense2_camera_node",
        namespace="cameras",
        name=name,
        parameters=[{"serial_no": LaunchConfiguration(serial_arg), "enable_depth": False}],
        remappings=[(f"/cameras/{name}/color/image_raw", f"/cameras/{name}/image_raw")],
        condition=IfCondition(LaunchConfiguration("cameras")),
        output="screen",
    )


def generate_launch_description() -> LaunchDescription:
    sim = ParameterValue(LaunchConfiguration("sim"), value_type=bool)
    return LaunchDescription(
        [
            DeclareLaunchArgument("driver_params", default_value=str(CONFIG / "yam_driver.yaml")),
            DeclareLaunchArgument("agent_params", default_value=str(CONFIG / "agent_real.yaml")),
            DeclareLaunchArgument("sim", default_value="false"),
            DeclareLaunchArgument("cameras", default_value="false"),
            *[DeclareLaunchArgument(arg, default_value="''") for arg in CAMERAS.values()],
            Node(
                package="pear_agent_ros2",
                executable="yam_driver_node",
                name="yam_left_driver",
                parameters=[LaunchConfiguration("driver_params"), {"arm": "left_arm", "sim": sim}],
                output="screen",
            ),
            Node(
                package="pear_agent_ros2",
                executable="yam_driver_node",
                name="yam_right_driver",
                parameters=[LaunchConfiguration("driver_params"), {"arm": "right_arm", "sim": sim}],
                output="screen",
            ),
            *[_camera(name, arg) for name, arg in CAMERAS.items()],
            Node(
                package="pear_agent_ros2",
                executable="agent_node",
                name="pear_agent",
                parameters=[LaunchConfiguration("agent_params")],
                output="screen",
            ),
        ]
    )
