import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from pear_agent.kinematics import Kinematics
from pear_agent.robot_config import RobotConfig, load_robot


@pytest.fixture(scope="session")
def panda() -> RobotConfig:
    return load_robot("panda")


@pytest.fixture(scope="session")
def panda_kin(panda: RobotConfig) -> Kinematics:
    return Kinematics(panda)


@pytest.fixture(scope="session")
def yam() -> RobotConfig:
    return load_robot("yam_bimanual")


@pytest.fixture(scope="session")
def yam_kin(yam: RobotConfig) -> Kinematics:
    return Kinematics(yam)
