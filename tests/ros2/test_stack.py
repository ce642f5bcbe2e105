"""The names every node of the stack shares are declared once (`pear_agent.ros2.stack`), and each
node's parameters are a typed settings model whose fields `ros2 param describe` explains."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pear_agent.ros2 import sim_robot_node, stack, yam_driver_node
from pear_agent.ros2.settings import AgentSettings, RosSettings

NODES = {
    "sim_robot_node": sim_robot_node.SimRobotSettings,
    "yam_driver_node": yam_driver_node.YamDriverSettings,
}


def test_a_stack_with_no_parameter_file_talks_on_the_same_topics_about_the_same_robot() -> None:
    agent, ros = AgentSettings(), RosSettings()
    assert agent.robot == stack.ROBOT
    assert (ros.joint_states_topic, ros.estop_topic) == (stack.JOINT_STATES_TOPIC, stack.ESTOP_TOPIC)
    for name, model in NODES.items():
        node = model()
        assert node.robot == agent.robot, name
        assert node.joint_states_topic == ros.joint_states_topic, name
    assert yam_driver_node.YamDriverSettings().estop_topic == ros.estop_topic


@pytest.mark.parametrize("name", list(NODES))
def test_every_node_parameter_is_typed_and_described(name: str) -> None:
    model = NODES[name]
    params = {"sim_robot_node": sim_robot_node.PARAMS, "yam_driver_node": yam_driver_node.PARAMS}[name]
    # a ROS parameter's type is its default's (declare_params): each default has its field's type
    for key, field in model.model_fields.items():
        assert type(params[key]) is field.annotation, (key, params[key], field.annotation)
    described = stack.parameter_descriptions(model)
    assert set(described) == set(params) and all(described.values()), described
    with pytest.raises(ValidationError):
        model(**{"sim_robot_node": {"seed": "first"}, "yam_driver_node": {"rate_hz": "fast"}}[name])
    with pytest.raises(ValidationError):
        model(no_such_parameter=1)
