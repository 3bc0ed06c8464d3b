"""Word lists for text agents: the presets ``"shapes"`` and ``"digits"``, or a list as given."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["WORD_PRESETS", "resolve_words"]


def _shapes() -> list[str]:
    from paddlecraft.craftdata.shapes import shapes_vocabulary

    return shapes_vocabulary()


def _digits() -> list[str]:
    from paddlecraft.craftdata.speech import DIGIT_WORDS

    return list(DIGIT_WORDS)


#: preset name -> the words it stands for (the caption grammar, "zero".."nine")
WORD_PRESETS: dict[str, Callable[[], list[str]]] = {"shapes": _shapes, "digits": _digits}


def resolve_words(words: str | Sequence[str], setting: str = "words") -> list[str]:
    """The word list a preset name (``"shapes"``, ``"digits"``) or a list stands for."""
    if isinstance(words, str):
        if words in WORD_PRESETS:
            return WORD_PRESETS[words]()
        raise ValueError(
            f"{setting}={words!r}: give a list of words or a preset ({', '.join(WORD_PRESETS)})"
        )
    return [str(w) for w in words]
