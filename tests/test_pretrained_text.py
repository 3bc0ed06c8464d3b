"""TransformerTextEncoder / WhisperStyleEncoder load BERT and Whisper files and match references.

Reference models are tiny, randomly initialised ones built here (nothing is downloaded):
Hugging Face BERT and Whisper (torch), and a PaddleNLP-layout BERT assembled from Paddle's
own ``nn.TransformerEncoder`` (what PaddleNLP's BertModel is built from). Outputs must
agree to 1e-4 in eval mode on the same inputs.
"""

from __future__ import annotations

import numpy as np
import paddle
import pytest
import torch
import transformers
from paddle import nn
from safetensors.torch import save_file

from paddlecraft.encoders import PretrainedLoadError
from paddlecraft.encoders.tokenizer import SubwordTokenizer
from paddlecraft.encoders.transformer_text import TransformerTextEncoder
from paddlecraft.encoders.whisper import WhisperStyleEncoder, whisper_log_mel

ATOL = 1e-4
BERT = dict(vocab_size=100, dim=32, depth=2, heads=2, mlp_dim=64, max_len=40)
WHISPER = dict(n_mels=16, dim=32, depth=2, heads=2, mlp_dim=64, n_ctx=20)


def _randomise_norms(model: torch.nn.Module, seed: int = 0) -> None:
    """LayerNorm affine params away from 1/0, so a missed or swapped norm shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))


def _save(model: torch.nn.Module, path, drop_prefix: str = "") -> None:
    """safetensors of the state dict; tied tensors (shared storage) are saved as copies."""
    sd = {
        k.removeprefix(drop_prefix): v.detach().clone().contiguous()
        for k, v in model.state_dict().items()
    }
    save_file(sd, str(path))


def _err(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max())


def _ids(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Token ids [3, 9] ([CLS]=2 first), row 1 right-padded with 0, and their mask."""
    ids = np.random.default_rng(seed).integers(5, 100, (3, 9))
    ids[:, 0] = 2
    ids[1, 6:] = 0
    return ids, (ids != 0).astype(np.int64)


@pytest.fixture(scope="module")
def hf_bert(tmp_path_factory):
    """BertForSequenceClassification(num_labels=3), randomised norms: (model, path)."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        vocab_size=100, max_position_embeddings=40, num_labels=3,
    )  # fmt: skip
    model = transformers.BertForSequenceClassification(cfg).eval()
    _randomise_norms(model)
    path = tmp_path_factory.mktemp("bert") / "bert_cls.safetensors"
    _save(model, path)
    return model, path


# ----------------------------------------------------------------------------- BERT
def test_bert_matches_transformers(scope, hf_bert):
    model, path = hf_bert
    enc = TransformerTextEncoder(scope, **BERT, num_classes=3)
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "hf_bert" and len(report.matched) == 41
    enc.eval()
    ids, mask = _ids()
    types = np.zeros_like(ids)
    types[:, 5:] = 1  # a second segment
    with torch.no_grad():
        t = [torch.from_numpy(a) for a in (ids, mask, types)]
        ref = model.bert(input_ids=t[0], attention_mask=t[1], token_type_ids=t[2])
        logits = model(input_ids=t[0], attention_mask=t[1], token_type_ids=t[2]).logits
    got = enc.forward_all(ids, mask, types)
    keep = mask.astype(bool)  # padded positions are not defined the same way
    assert _err(got["hidden"].numpy()[keep], ref.last_hidden_state.numpy()[keep]) <= ATOL
    assert _err(got["pooled"].numpy(), ref.pooler_output.numpy()) <= ATOL
    assert _err(got["prediction"].numpy(), logits.numpy()) <= ATOL
    # the default mask (tokens != pad_id) and token types (zeros) are BERT's defaults
    with torch.no_grad():
        plain = model.bert(input_ids=t[0], attention_mask=t[1]).pooler_output.numpy()
    assert _err(enc.forward_all(ids)["pooled"].numpy(), plain) <= ATOL


def test_bert_pretraining_file_without_prefix_and_heads(scope, tmp_path):
    """BertForPreTraining: its cls.* heads are skipped; a bare BertModel file has no prefix."""
    torch.manual_seed(1)
    cfg = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        vocab_size=100, max_position_embeddings=40,
    )  # fmt: skip
    model = transformers.BertForPreTraining(cfg).eval()
    _randomise_norms(model, seed=1)
    _save(model, tmp_path / "pre.safetensors")
    _save(model.bert, tmp_path / "bare.safetensors")
    ids, mask = _ids(1)
    with torch.no_grad():
        ref = model.bert(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    for name in ("pre", "bare"):
        enc = TransformerTextEncoder(f"{scope}_{name}", **BERT)
        assert enc.load_pretrained(tmp_path / f"{name}.safetensors").ok
        enc.eval()
        assert _err(enc(ids, mask).numpy(), ref.pooler_output.numpy()) <= ATOL


def test_bert_wrong_depth_strict_error_and_head_non_strict(scope, make_scope, hf_bert):
    _, path = hf_bert
    with pytest.raises(PretrainedLoadError, match=r"unexpected in the file.*\n.*layer\.1\."):
        TransformerTextEncoder(scope, **{**BERT, "depth": 1}, num_classes=3).load_pretrained(path)
    enc = TransformerTextEncoder(make_scope(), **BERT, num_classes=5)  # a new head
    report = enc.load_pretrained(path, strict=False)
    mismatched = {k for k, _, _ in report.mismatched}
    assert mismatched == {"layers.prediction.weight", "layers.prediction.bias"}
    assert len(report.matched) == 39


class _PaddleNLPBert(nn.Layer):
    """PaddleNLP's BertModel layout from paddle.nn: embeddings, nn.TransformerEncoder, pooler."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Layer()
        self.embeddings.word_embeddings = nn.Embedding(100, 32)
        self.embeddings.position_embeddings = nn.Embedding(40, 32)
        self.embeddings.token_type_embeddings = nn.Embedding(2, 32)
        self.embeddings.layer_norm = nn.LayerNorm(32, epsilon=1e-12)
        block = nn.TransformerEncoderLayer(
            32, 2, 64, dropout=0.0, activation="gelu", attn_dropout=0.0, act_dropout=0.0
        )
        self.encoder = nn.TransformerEncoder(block, 2)
        for m in self.encoder.sublayers():
            if isinstance(m, nn.LayerNorm):
                m._epsilon = 1e-12  # PaddleNLP's init_weights does the same
        self.pooler = nn.Layer()
        self.pooler.dense = nn.Linear(32, 32)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        e = self.embeddings
        pos = paddle.arange(ids.shape[1]).unsqueeze(0)
        x = e.word_embeddings(ids) + e.position_embeddings(pos)
        x = e.layer_norm(x + e.token_type_embeddings(paddle.zeros_like(ids)))
        bias = (paddle.cast(ids == 0, "float32") * -1e4).unsqueeze([1, 2])
        return paddle.tanh(self.pooler.dense(self.encoder(x, bias)[:, 0]))


def test_bert_from_paddlenlp_layout_pdparams(scope, tmp_path):
    paddle.seed(2)
    ref = _PaddleNLPBert()
    wrapper = nn.Layer()
    wrapper.bert = ref  # PaddleNLP task models keep the backbone under ``bert.``
    for k, p in wrapper.state_dict().items():
        if "norm" in k:  # norms away from 1/0
            p.set_value(
                p.numpy() + np.random.default_rng(0).normal(0, 0.2, p.shape).astype("float32")
            )
    path = tmp_path / "paddlenlp_bert.pdparams"
    paddle.save(wrapper.state_dict(), str(path))
    ref.eval()
    enc = TransformerTextEncoder(scope, **BERT)
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "paddlenlp_bert"
    enc.eval()
    ids, _ = _ids(2)
    assert _err(enc(ids).numpy(), ref(paddle.to_tensor(ids)).numpy()) <= ATOL


def test_bert_names_api_and_tokenizer_end_to_end(scope, tmp_path, hf_bert):
    model, path = hf_bert
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = SubwordTokenizer.from_file(tmp_path / "vocab.txt")
    texts = ["w7 w12 w99", "w3 w50 w51 w52 w8"]
    ids, mask = tok.encode_batch(texts)
    hf_tok = transformers.BertTokenizer(vocab=str(tmp_path / "vocab.txt"))  # transformers 5 API
    want = hf_tok(texts, padding=True, return_tensors="np")
    np.testing.assert_array_equal(ids, want["input_ids"])
    np.testing.assert_array_equal(mask, want["attention_mask"])

    enc = TransformerTextEncoder(scope, **BERT, num_classes=3, pretrained=str(path))
    enc.build()  # loads the file
    enc.eval()
    with torch.no_grad():
        ref = model.bert(**{k: torch.from_numpy(v) for k, v in want.items()}).pooler_output
    assert _err(enc.forward_all(ids, mask)["pooled"].numpy(), ref.numpy()) <= ATOL

    assert enc.logical_names == ["embeddings", "layers.0", "layers.1", "pooler", "prediction"]
    block = enc.get_param("layers.1")["layers.1"]
    assert len(block) == 16 and all(p.name.startswith(f"{scope}.layers.1.") for p in block)
    enc.freeze("embeddings")
    out = enc.forward_all(ids, mask)
    out["prediction"].sum().backward()
    pooled_grad = enc.get_gradient("pooled")["pooled"][0]
    assert pooled_grad.shape == [2, 32] and float(paddle.abs(pooled_grad).max()) > 0
    assert all(p.grad is None for p in enc.get_param("embeddings")["embeddings"])
    assert all(g is not None for g in enc.get_gradient("layers.0")["layers.0"])
    enc.unfreeze("embeddings")
    assert not enc.is_frozen("embeddings")
    table = str(enc.summary())
    assert f"{scope}.layers.0." in table and "layers.1" in table


def test_bert_sizes_and_input_errors(scope, make_scope):
    mini = TransformerTextEncoder(scope, size="mini", vocab_size=50, max_len=16)
    assert (mini.depth, mini.dim, mini.heads, mini.mlp_dim) == (4, 256, 4, 1024)
    with pytest.raises(ValueError, match="size must be one of"):
        TransformerTextEncoder(make_scope(), size="huge")
    with pytest.raises(ValueError, match="give size="):
        TransformerTextEncoder(make_scope(), dim=32)
    enc = TransformerTextEncoder(make_scope(), **BERT)
    with pytest.raises(Exception, match="max_len=40"):
        enc(np.ones((1, 41), np.int64))
    with pytest.raises(Exception, match="ids must be in"):
        enc(np.full((1, 4), 100))
    with pytest.raises(Exception, match="one shape"):
        enc(np.ones((2, 4), np.int64), np.ones((2, 5), np.int64))


# ----------------------------------------------------------------------------- Whisper
@pytest.fixture(scope="module")
def hf_whisper(tmp_path_factory):
    """A tiny WhisperModel (encoder + decoder), randomised norms: (model, path)."""
    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(
        d_model=32, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64, num_mel_bins=16,
        max_source_positions=20, max_target_positions=16, vocab_size=50, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
    )  # fmt: skip
    model = transformers.WhisperModel(cfg).eval()
    _randomise_norms(model)
    path = tmp_path_factory.mktemp("whisper") / "whisper.safetensors"
    _save(model, path)
    return model, path


def test_whisper_matches_transformers_and_skips_decoder(scope, hf_whisper):
    model, path = hf_whisper
    enc = WhisperStyleEncoder(scope, **WHISPER)
    enc.build()
    table = model.encoder.embed_positions.weight.detach().numpy()
    assert _err(enc.layers["positions"].weight.numpy(), table) <= 1e-6  # same sinusoids
    report = enc.load_pretrained(path)
    assert report.ok and report.source == "hf_whisper" and len(report.matched) == 37
    assert enc.layers["layers.0"].self_attn.k_proj.bias is None  # Whisper's key has no bias
    enc.eval()
    mel = np.random.default_rng(0).normal(size=(2, 16, 40)).astype(np.float32)
    with torch.no_grad():
        ref = model.encoder(torch.from_numpy(mel)).last_hidden_state.numpy()
    got = enc.forward_all(mel)
    assert got["hidden"].shape == [2, 20, 32]
    assert _err(got["hidden"].numpy(), ref) <= ATOL
    assert _err(got["pooled"].numpy(), ref.mean(axis=1)) <= ATOL


def test_whisper_encoder_only_file_and_names_api(scope, tmp_path, hf_whisper):
    model, _ = hf_whisper
    _save(model.encoder, tmp_path / "encoder.safetensors")  # conv1.weight, layers.0...: no prefix
    enc = WhisperStyleEncoder(scope, **WHISPER, pretrained=str(tmp_path / "encoder.safetensors"))
    enc.build()
    enc.eval()
    mel = np.random.default_rng(1).normal(size=(1, 16, 40)).astype(np.float32)
    with torch.no_grad():
        ref = model.encoder(torch.from_numpy(mel)).last_hidden_state.numpy()
    assert _err(enc.forward_all(mel)["hidden"].numpy(), ref) <= ATOL
    assert enc.logical_names == ["conv1", "conv2", "positions", "layers.0", "layers.1", "ln_post"]
    assert len(enc.get_param("layers.1")["layers.1"]) == 15  # no key bias
    enc.freeze("conv1")
    enc.forward_all(mel)["pooled"].sum().backward()
    assert enc.get_gradient("pooled")["pooled"][0].shape == [1, 32]
    assert all(p.grad is None for p in enc.get_param("conv1")["conv1"])
    assert "ln_post" in str(enc.summary())
    with pytest.raises(Exception, match="n_ctx=20"):
        enc(np.zeros((1, 16, 42), np.float32))


def test_whisper_log_mel_matches_feature_extractor():
    extractor = transformers.WhisperFeatureExtractor(feature_size=80, chunk_length=1)  # 1 s
    rng = np.random.default_rng(3)
    t = np.arange(16000) / 16000
    waves = np.stack(
        [
            0.3 * np.sin(2 * np.pi * 440 * t) + 0.01 * rng.normal(size=16000),
            0.1 * rng.normal(size=16000),
        ]
    ).astype(np.float32)
    want = extractor(list(waves), sampling_rate=16000, return_tensors="np").input_features
    got = whisper_log_mel(waves, n_mels=80).numpy()
    assert got.shape == want.shape == (2, 80, 100)
    assert _err(got, want) <= ATOL


def test_whisper_tiny_size_and_waveform_path(scope):
    enc = WhisperStyleEncoder(scope, size="tiny", n_ctx=50)
    assert (enc.depth, enc.dim, enc.heads, enc.n_mels) == (4, 384, 6, 80)
    out = enc.forward_waveform(
        np.random.default_rng(0).normal(size=(2, 16000)).astype("float32") * 0.1
    )
    assert out["hidden"].shape == [2, 50, 384] and out["pooled"].shape == [2, 384]
