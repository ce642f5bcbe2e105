"""The MuJoCo arm tasks' scripted experts by task name (single-arm and dual-arm); other families
name their own experts (`ArmFamily.expert`: LIBERO's lives beside its adapter)."""

from __future__ import annotations

from pear_agent.policies.experts import SINGLE_ARM_EXPERTS, Expert
from pear_agent.policies.experts_bimanual import align_blocks, bimanual_pickup

EXPERTS: dict[str, Expert] = {
    **SINGLE_ARM_EXPERTS,
    "bimanual_pickup": bimanual_pickup,
    "align_blocks": align_blocks,
}
