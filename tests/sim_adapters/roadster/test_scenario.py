import pytest

from sim_adapters.roadster.scenario import WIND_BANDS, make_scenario


def test_same_seed_same_flight_and_bands_only_change_the_wind():
    a, b = make_scenario("kickflip", "light", 20001), make_scenario("kickflip", "light", 20001)
    assert a == b
    storm = make_scenario("kickflip", "storm", 20001)
    assert (storm.speed_mps, storm.air_kg, storm.truck_x_m) == (a.speed_mps, a.air_kg, a.truck_x_m)
    assert storm.wind_mean_mps != a.wind_mean_mps


@pytest.mark.parametrize("band", list(WIND_BANDS))
def test_ranges_follow_the_study(band):
    lo, hi = WIND_BANDS[band]
    for seed in range(200):
        k = make_scenario("kickflip", band, seed)
        assert 50 / 3.6 <= k.speed_mps <= 94 / 3.6
        assert 110 <= k.air_kg <= 170
        assert lo <= k.wind_mean_mps <= hi
        r = make_scenario("ramp_flip", band, seed)
        assert 10 <= r.exit_height_m <= 14


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown wind band 'hurricane'"):
        make_scenario("kickflip", "hurricane", 0)
    with pytest.raises(ValueError, match="unknown stunt"):
        make_scenario("backflip", "light", 0)
