"""ROS 2 side of pear-agent: the rclpy backend, the agent node and the simulated robot node.

rclpy is imported only inside these modules' functions and classes that need it, never by the
turn loop; `conversions` is pure numpy/OpenCV so it can be tested without ROS.
"""
