"""rclpy plumbing every node shares: spinning a node in its own thread, parameters, the controller
manager's view of its controllers, topic names."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"
"""The node name the ROS graph gives an endpoint before its node's discovery info has arrived."""

_EXTRA_SPINNERS: list[Any] = []
"""Stops of the nodes a RosBackend spins itself (its joint-state / e-stop node): run by
spin_in_background's shutdown after rclpy's, before the caller's node is destroyed."""


def spin_in_background(node: Any) -> Any:
    """Spin `node` in a daemon thread (callbacks run there while the caller blocks). Returns a
    function that shuts rclpy down, joins the thread and destroys the node, in that order (any
    other order can abort the interpreter at exit)."""
    import rclpy  # optional: rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor  # optional: rclpy

    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException, KeyboardInterrupt):
            executor.spin()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()

    def shutdown() -> None:
        rclpy.try_shutdown()
        thread.join(timeout=2.0)
        executor.shutdown(timeout_sec=1.0)
        while _EXTRA_SPINNERS:
            _EXTRA_SPINNERS.pop()()
        node.destroy_node()

    return shutdown


def spin_own_node(node: Any) -> Any:
    """Spin `node` in a daemon thread of its own (its callbacks never queue behind another node's);
    returns its stop function, also registered to run at spin_in_background's shutdown."""
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor  # optional: rclpy

    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException, KeyboardInterrupt):
            executor.spin()

    thread = threading.Thread(target=spin, daemon=True, name=f"spin {node.get_name()}")
    thread.start()
    done = threading.Event()

    def stop() -> None:
        if done.is_set():
            return
        done.set()
        executor.shutdown(timeout_sec=1.0)
        thread.join(timeout=2.0)
        node.destroy_node()

    _EXTRA_SPINNERS.append(stop)
    return stop


def json_object(msg: Any) -> dict[str, Any] | None:
    """The JSON object a std_msgs/String carries (a driver's status), or None for anything else: a
    bad message from one publisher must not raise in a subscription callback."""
    try:
        value = json.loads(msg.data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def declare_params(
    node: Any, defaults: dict[str, Any], descriptions: dict[str, str] | None = None
) -> dict[str, Any]:
    """Declare ROS parameters with these defaults (and descriptions, for `ros2 param describe`);
    ints are accepted for floats (YAML `1` for `1.0`), any other type mismatch is a ValueError
    naming the parameter (no rclpy traceback)."""
    from rcl_interfaces.msg import ParameterDescriptor  # optional: rclpy

    out: dict[str, Any] = {}
    for key, default in defaults.items():
        about = (descriptions or {}).get(key, "")
        descriptor = ParameterDescriptor(description=about, dynamic_typing=True)
        value = node.declare_parameter(key, default, descriptor).value
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(default):
            raise ValueError(
                f"parameter {key}: expected {type(default).__name__}, got {type(value).__name__} {value!r}"
            )
        out[key] = value
    return out


def controller_states(node: Any, controller_manager: str, timeout_s: float = 2.0) -> dict[str, str] | None:
    """Controller name -> state from controller_manager's list_controllers, where its message package
    is installed (it is not among the PyPI ROS wheels); None where it cannot be asked. `node` must be
    spun by another thread."""
    try:
        # optional: rclpy
        from controller_manager_msgs.srv import ListControllers  # type: ignore[import-not-found]
    except ImportError:
        return None
    client = node.create_client(ListControllers, f"{controller_manager}/list_controllers")
    try:
        if not client.wait_for_service(timeout_sec=min(1.0, timeout_s)):
            return None
        future = client.call_async(ListControllers.Request())
        deadline = time.monotonic() + timeout_s
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not future.done() or future.result() is None:
            return None
        return {c.name: c.state for c in future.result().controller}
    finally:
        node.destroy_client(client)


def trajectory_topic(controller: str) -> str:
    return f"/{controller.strip('/')}/joint_trajectory"


def is_compressed_topic(topic: str) -> bool:
    """image_transport's convention: a CompressedImage topic ends with /compressed."""
    return topic.rstrip("/").endswith("/compressed")
