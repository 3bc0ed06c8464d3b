"""The seed README's cases 1-5 as assertions, in dynamic and static mode (examples/seed_cases.py)."""

from __future__ import annotations

import paddle
import pytest

from examples import seed_cases

MODES = ["dynamic", "static"]


@pytest.fixture(params=MODES)
def mode(request):
    if request.param == "static":
        paddle.enable_static()
    return request.param


def test_case1_loss_falls_and_accuracy_rises(mode):
    r = seed_cases.case1_train(mode, epochs=3)
    assert r["loss_last"] < 0.5 * r["loss_first"]
    assert r["acc_after"] > r["acc_before"] + 0.5
    assert r["acc_after"] > 0.8


def test_case2_shared_layers_are_one_parameter_updated_once(mode):
    r = seed_cases.case2_shared(mode)
    assert r["physical_1"] == r["physical_2"]
    assert r["n_params"] == 4  # hidden w/b once, prediction w/b
    assert r["grad_norm"] > 1e-4  # the check below means something
    assert r["update_error_once"] < 1e-7
    assert r["update_error_twice"] > 100 * max(r["update_error_once"], 1e-9)


def test_case3_fetched_params_equal_optimizer_output(mode):
    r = seed_cases.case3_fetch_params(mode)
    assert r["physical"][0].endswith(".hidden_layer_1.w_0")
    assert r["max_gap"] < 1e-7


def test_case4_gradients_match_finite_differences(mode):
    r = seed_cases.case4_gradients(mode)
    assert r["param_rel_error"] < 1e-3
    assert r["prediction_rel_error"] < 1e-3


def test_case5_frozen_bit_identical_then_moves(mode):
    r = seed_cases.case5_freeze(mode)
    assert r["frozen_identical"]
    assert r["others_moved"] > 1e-4
    assert r["moved_after_unfreeze"] > 1e-4
