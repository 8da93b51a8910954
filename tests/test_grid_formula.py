"""The reference grid-formula semantics every launcher (C library, Python runtime) must match."""

from kernelpack.core.launchspec import LaunchSpec, evaluate_grid, grid_params


def test_div_truncates_toward_zero_exactly_beyond_float_precision():
    big = 2**62 + 1
    assert evaluate_grid(("div", big, 3), {}) == big // 3
    assert evaluate_grid(("div", -7, 2), {}) == -3
    assert evaluate_grid(("div", 7, -2), {}) == -3
    assert evaluate_grid(("div", 7, 0), {}) == 0


def test_ceil_div_of_argument_fields_and_zero_extents():
    rule = ("ceil_div", ("arg", "c", "shape1"), 32)
    assert evaluate_grid(rule, {("c", "shape1"): 100}) == 4
    assert evaluate_grid(rule, {("c", "shape1"): 0}) == 0  # nothing to launch
    assert evaluate_grid(("ceil_div", 5, 0), {}) == 0
    assert grid_params(("max", rule, ("arg", "n", None))) == [("c", "shape1"), ("n", None)]


def test_grid_rules_round_trip_through_json():
    spec = LaunchSpec(grid=(["ceil_div", ["arg", "c", "shape0"], 8], 1, ["min", ["arg", "n", None], 65535]))
    back = LaunchSpec.from_json(spec.to_json())
    assert back == spec and back.grid[1] == 1
