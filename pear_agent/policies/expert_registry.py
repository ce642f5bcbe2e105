"""Every scripted expert by task name (single-arm MuJoCo, dual-arm YAM, LIBERO)."""

from __future__ import annotations

from pear_agent.policies.experts import SINGLE_ARM_EXPERTS, Expert
from pear_agent.policies.experts_bimanual import align_blocks, bimanual_pickup
from pear_agent.policies.experts_libero import LIBERO_EXPERTS

EXPERTS: dict[str, Expert] = {
    **SINGLE_ARM_EXPERTS,
    "bimanual_pickup": bimanual_pickup,
    "align_blocks": align_blocks,
    **LIBERO_EXPERTS,
}
