"""Config interpolations: ``${craft.mul:...}`` (pure arithmetic) and the caption words.

``craft.caption_words`` / ``craft.speech_alphabet`` give the caption agents the words of the
training captions and the recognizer the characters of the training transcripts
(``conf/data/captions.yaml``, ``conf/data/speech.yaml``). They read the files once per
argument list (cached), before anything is built, so bad data fails first.
"""

from __future__ import annotations

import math
from pathlib import Path

from omegaconf import OmegaConf

from paddlecraft.craftdata.badfiles import BadDataError
from paddlecraft.errors import command

__all__ = ["register_resolvers"]


def _need_path(path: str | None, data: str) -> str:
    if path is None:
        raise BadDataError(f"data.path is not set: {command()} ... data={data} data.path=...")
    return path


def _caption_words(
    path: str | None,
    test_path: str | None,
    image_root: str | None,
    test_fraction: float,
    seed: int,
    min_freq: int,
    max_vocab: int | None,
    on_bad_file: str,
    tokenizer: str | None = None,
) -> list[str] | str:
    """The vocabulary of the training captions (most frequent first), specials left out; or
    the ``tokenizer`` file itself when one is given (the agents read it)."""
    from paddlecraft.craftdata.captions import load_captions

    data = load_captions(
        _need_path(path, "captions"), test_path, image_root, float(test_fraction), int(seed),
        min_freq=int(min_freq), max_vocab=max_vocab, tokenizer=tokenizer, workers=0,
        on_bad_file=on_bad_file,
    )  # fmt: skip
    if tokenizer:
        return str(Path(tokenizer).expanduser().resolve())
    return list(data.vocab.itos[4:])


def _speech_alphabet(
    path: str | None, test_path: str | None, test_fraction: float, seed: int
) -> list[str]:
    """The characters of the training transcripts (a space included), sorted."""
    from paddlecraft.craftdata.transcripts import split_rows, training_alphabet

    train, _ = split_rows(_need_path(path, "speech"), test_path, float(test_fraction), int(seed))
    return list(training_alphabet(train))


def register_resolvers() -> None:
    """Register the ``craft.*`` resolvers with OmegaConf (idempotent)."""
    OmegaConf.register_new_resolver(
        "craft.caption_words", _caption_words, replace=True, use_cache=True
    )
    OmegaConf.register_new_resolver(
        "craft.speech_alphabet", _speech_alphabet, replace=True, use_cache=True
    )
    OmegaConf.register_new_resolver(
        "craft.mul", lambda *xs: math.prod(int(x) for x in xs), replace=True
    )
