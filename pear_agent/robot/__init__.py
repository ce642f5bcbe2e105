"""The robot: its YAML description (schema and loader), objects, the model built from the maker's
files, kinematics (Pinocchio FK/IK), the motion-end rule, and the backend contract every robot offers
(simulated or real)."""
