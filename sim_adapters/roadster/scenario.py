"""One flight's randomised conditions, a pure function of (stunt, wind band, seed).

The seed splits are the bench's (train 0..9999, val 10000..10999, test 20000..20999): the same
seed gives the same speed, air, wind, gusts and ramp or truck in every run, so paired tests pair.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

Stunt = Literal["ramp_flip", "kickflip"]
WindBand = Literal["light", "gale", "storm"]
STUNTS: tuple[str, ...] = ("ramp_flip", "kickflip")
WIND_BANDS: dict[str, tuple[float, float]] = {
    "light": (2.0, 14.0),
    "gale": (14.0, 24.0),
    "storm": (24.0, 33.0),
}
"""Mean wind speed range per band, m/s (at 10 m; weaker near the road)."""


@dataclass(frozen=True)
class Scenario:
    stunt: str
    wind_band: str
    seed: int
    speed_mps: float
    """Entry speed: kickflip on the road; ramp flip at the ramp's lip."""
    air_kg: float
    wind_mean_mps: float
    wind_from_deg: float
    """Direction the mean wind blows FROM, relative to the road: 0 = head-on, 90 = from the left."""
    gust_sigma_frac: float
    """Standard deviation of the gusts as a fraction of the mean."""
    gust_tau_s: float
    truck_x_m: float = 0.0
    """Kickflip: distance from the car's start to the truck's near end."""
    exit_height_m: float = 0.0
    """Ramp flip: height of the ramp's lip (the car leaves it upside down)."""
    exit_roll_rate_dps: float = 0.0
    """Ramp flip: roll rate the corkscrew leaves on the car."""
    exit_vz_mps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def make_scenario(stunt: str, wind_band: str, seed: int) -> Scenario:
    if stunt not in STUNTS:
        raise ValueError(f"unknown stunt {stunt!r}; stunts are: {', '.join(STUNTS)}")
    if wind_band not in WIND_BANDS:
        raise ValueError(f"unknown wind band {wind_band!r}; bands are: {', '.join(WIND_BANDS)}")
    # one stream per (stunt, band, seed): the same seed in another band changes only the wind
    rng = np.random.default_rng([int(seed), STUNTS.index(stunt)])
    wind_rng = np.random.default_rng([int(seed), STUNTS.index(stunt), 7 + list(WIND_BANDS).index(wind_band)])
    lo, hi = WIND_BANDS[wind_band]
    common: dict[str, Any] = {
        "stunt": stunt,
        "wind_band": wind_band,
        "seed": int(seed),
        "air_kg": float(rng.uniform(110.0, 170.0)),
        "wind_mean_mps": float(wind_rng.uniform(lo, hi)),
        "wind_from_deg": float(wind_rng.uniform(0.0, 360.0)),
        "gust_sigma_frac": float(wind_rng.uniform(0.2, 0.4)),
        "gust_tau_s": float(wind_rng.uniform(0.6, 1.6)),
    }
    if stunt == "kickflip":
        speed = float(rng.uniform(50.0, 94.0) / 3.6)
        time_to_truck = float(rng.uniform(1.6, 3.2))
        return Scenario(speed_mps=speed, truck_x_m=speed * time_to_truck, **common)
    return Scenario(
        speed_mps=float(rng.uniform(11.0, 17.0)),
        exit_height_m=float(rng.uniform(10.0, 14.0)),
        exit_roll_rate_dps=float(rng.uniform(-25.0, 60.0)),
        exit_vz_mps=float(rng.uniform(0.5, 3.0)),
        **common,
    )


def wind_vector(mean_mps: float, from_deg: float) -> np.ndarray:
    """World-frame horizontal wind velocity (where the air goes) for a wind blowing FROM from_deg."""
    a = math.radians(from_deg)
    return -mean_mps * np.array([math.cos(a), math.sin(a), 0.0])


TEST_EPISODES: dict[str, int] = {"light": 192, "gale": 192, "storm": 384}
"""The study's held-out test set per wind band (per stunt): 192 light, 192 gale, 384 storm flights."""


def time_to_truck_s(sc: Scenario) -> float:
    """Kickflip: seconds from the start until the nose reaches the truck at the entry speed."""
    return sc.truck_x_m / sc.speed_mps if sc.speed_mps > 0 else math.inf


def slow_approach(sc: Scenario) -> bool:
    """The study's slow far-truck kickflips: 14 to 16 m/s with the truck about 3 s away (>= 2.6 s)."""
    return sc.stunt == "kickflip" and 14.0 <= sc.speed_mps <= 16.0 and time_to_truck_s(sc) >= 2.6


SCENARIO_FILTERS = {"slow_approach": slow_approach}
"""Named filters a training mix draws seeds through (`pear_agent.train.mix`)."""


def filtered_seeds(stunt: str, wind_band: str, name: str, lo: int, hi: int, count: int) -> list[int]:
    """The first `count` seeds in [lo, hi) whose scenario passes filter `name`."""
    if name not in SCENARIO_FILTERS:
        raise ValueError(f"unknown scenario filter {name!r}; filters are: {', '.join(SCENARIO_FILTERS)}")
    keep = SCENARIO_FILTERS[name]
    out = []
    for seed in range(lo, hi):
        if keep(make_scenario(stunt, wind_band, seed)):
            out.append(seed)
            if len(out) == count:
                break
    return out
