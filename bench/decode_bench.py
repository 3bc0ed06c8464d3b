"""Caption decoding: batched beam search (all sentences x beams in one pass per time step)
against decoding one sentence at a time with the same decoder, beam and length.

The decoder is trained briefly on shapes-like captions so decoding runs to natural
lengths (an untrained decoder would stop at random). Run: ``python bench/decode_bench.py``
(``--decoder transformer``: the GPT-style ``TransformerTextDecoder`` with its KV cache).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bench_decoding(
    n_sentences: int = 256, beam: int = 4, train_steps: int = 150, decoder: str = "gru"
) -> dict:
    """Sentences/s of batched beam search vs a per-sentence loop (same outputs checked)."""
    import numpy as np
    import paddle

    from paddlecraft.encoders import TextDecoder, TransformerTextDecoder, Vocab

    rng = np.random.default_rng(0)
    colours, shapes = ["red", "green", "blue", "yellow"], ["circle", "square", "triangle"]
    rels = ["left of", "right of", "above", "below"]
    combos = [
        (c1, s1, r, c2, s2)
        for c1 in colours
        for s1 in shapes
        for r in rels
        for c2 in colours
        for s2 in shapes
    ]
    captions = [f"a {c1} {s1} {r} a {c2} {s2}" for c1, s1, r, c2, s2 in combos]
    vocab = Vocab.build(captions)
    k = len(captions)
    paddle.seed(0)
    if decoder == "transformer":
        dec = TransformerTextDecoder(
            "bench_decoder", len(vocab), cond_dim=32, dim=128, depth=2, heads=4, max_len=12
        )
    else:
        dec = TextDecoder("bench_decoder", vocab_size=len(vocab), cond_dim=32, max_len=12)
    table = rng.normal(size=(k, 32)).astype("float32")  # one condition vector per caption
    targets = vocab.encode_batch(captions)
    opt = paddle.optimizer.Adam(3e-3, parameters=dec.parameters())
    for _ in range(train_steps):
        idx = rng.integers(0, k, 128)
        loss = dec.loss(paddle.to_tensor(table[idx]), paddle.to_tensor(targets[idx]))
        loss.backward()
        opt.step()
        opt.clear_grad()
    dec.eval()
    cond = table[rng.integers(0, k, n_sentences)]

    dec.beam_search(cond[:8], beam_size=beam)  # warm-up
    t = time.perf_counter()
    batched = dec.beam_search(cond, beam_size=beam)
    t_batched = time.perf_counter() - t
    m = min(n_sentences, max(16, n_sentences // 8))  # the slow path: a subset, its rate
    t = time.perf_counter()
    single = [dec.beam_search(cond[i : i + 1], beam_size=beam)[0] for i in range(m)]
    t_single = time.perf_counter() - t
    same = all(vocab.decode(a) == vocab.decode(b) for a, b in zip(batched[:m], single))
    return {
        "batched_sentences_per_s": n_sentences / t_batched,
        "one_at_a_time_sentences_per_s": m / t_single,
        "speedup": (n_sentences / t_batched) / (m / t_single),
        "decoder": type(dec).__name__,
        "beam": beam,
        "sentences": n_sentences,
        "same_output": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--decoder", choices=["gru", "transformer"], default="gru")
    args = parser.parse_args()
    n = 128 if args.quick else 256
    print(json.dumps(bench_decoding(n, decoder=args.decoder), indent=2))


if __name__ == "__main__":
    main()
