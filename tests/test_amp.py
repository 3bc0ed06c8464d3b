"""Per-agent mixed precision settings: validated up front, refused where Paddle cannot honour them."""

from __future__ import annotations

import numpy as np
import pytest

from paddlecraft.agents import Agent, Classifier
from paddlecraft.agents.amp import AmpError, autocast_casts_on_cpu, check_amp

MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 64, "hidden_size": 16}


@pytest.mark.parametrize("mode", ["bf16", "fp16"])
def test_amp_on_cpu_is_refused_unless_paddle_casts_there(make_scope, mode):
    dtype = {"bf16": "bfloat16", "fp16": "float16"}[mode]
    if autocast_casts_on_cpu(dtype):  # a build that really computes in half precision on CPU
        clf = Classifier(make_scope("clf"), encoder=MLP, seed=0, amp=mode)
        out = clf(np.zeros((2, 64), np.float32))
        assert str(out.dtype).endswith("float32")  # outputs come back in float32
    else:  # Paddle 3.3.1: auto_cast only warns on CPU, so the setting would be a lie
        name = make_scope("clf")
        with pytest.raises(
            AmpError, match=rf"agents\.{name}\.amp={mode} on CPU.*set agents\.{name}\.amp=off"
        ):
            Classifier(name, encoder=MLP, seed=0, amp=mode)


def test_bad_amp_values_name_the_setting():
    with pytest.raises(
        AmpError, match=r"agents\.g\.amp='fp8': expected one of \['off', 'bf16', 'fp16'\]"
    ):
        check_amp("fp8", "O1", "gpu:0", "agents.g.amp")
    with pytest.raises(AmpError, match=r"agents\.g\.amp_level='O3'"):
        check_amp("bf16", "O3", "gpu:0", "agents.g.amp")


def test_amp_off_is_recorded_and_reloads(make_scope, tmp_path):
    clf = Classifier(make_scope("clf"), encoder=MLP, seed=0)
    assert not clf.amp.enabled
    clf.save(tmp_path)
    again = Agent.load(tmp_path, name=make_scope("copy"))
    assert (again.cfg.amp, again.cfg.amp_level) == ("off", "O1")
