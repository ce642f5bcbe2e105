"""MuJoCo scenes, tasks and the MuJoCo backend."""
