"""The seed README's cases 1-5 in dynamic and static mode, and case 7 (image + language), as
assertions (examples/seed_cases.py)."""

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


def test_case7_two_towers_learn_one_space_from_scratch():
    r = seed_cases.case7_image_language(steps=100)
    assert r["loss_last"] < 0.75 * r["loss_first"]
    # held-out images: their own caption, among 64, scores best (chance 1/64)
    assert r["acc_after"] >= 3 / 64 and r["acc_after"] > r["acc_before"]


def test_case7_loads_a_clip_file_and_scores_pairs_as_transformers(tmp_path):
    import numpy as np
    import torch
    from clip_kit import TEXT, VISION, tiny_clip, write_bpe_files
    from safetensors.torch import save_file

    from paddlecraft.encoders import CLIPTokenizer

    folder = write_bpe_files(tmp_path / "tokenizer")
    tok = CLIPTokenizer.from_files(folder, context_length=16)
    model = tiny_clip(vocab_size=len(tok), eos=tok.eos_id, bos=tok.bos_id)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(tmp_path / "clip.safetensors"))
    images = np.random.default_rng(0).normal(size=(2, 3, 16, 16)).astype(np.float32)
    captions = ["a photo of a red circle", "two green triangles", "a blue square on the left"]
    r = seed_cases.case7_image_language(
        weights=str(tmp_path / "clip.safetensors"), tokenizer=str(folder), images=images,
        captions=captions, vision=dict(VISION, projection_dim=24),
        text=dict(TEXT, vocab_size=len(tok), projection_dim=24),
    )  # fmt: skip
    assert r["matched"]
    ids, mask = tok.encode_batch(captions)
    with torch.no_grad():
        want = model(
            pixel_values=torch.from_numpy(images),
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
        ).logits_per_image.numpy()
    np.testing.assert_allclose(np.array(r["logits_per_image"]), want, atol=1e-5, rtol=0)
