"""pear-agent: a robot-use agent runtime. A model's JSON reply moves a robot, turn by turn."""

__version__ = "0.1.0"
