"""The GAN's closing line compares its FID with the untrained generator's in the right words."""

from __future__ import annotations

from paddlecraft.arenas.gan.metrics import summary_line, versus_untrained


def _metrics(fid: float, untrained: float) -> dict[str, float]:
    return {
        "fid": fid,
        "fid_untrained": untrained,
        "fid_ratio": untrained / fid,
        "fid_real": 0.5,
        "recall": 0.8,
        "precision": 0.7,
        "coverage": 0.6,
        "density": 0.9,
        "class_entropy": 0.95,
        "classes_generated": 10.0,
        "inception_score": 8.0,
    }


def test_a_trained_generator_better_than_untrained_reads_lower():
    assert versus_untrained(10.0, 250.0) == "25.0x lower"
    line = summary_line(_metrics(10.0, 250.0), 10)
    assert "(untrained generator 250.00: 25.0x lower;" in line


def test_a_generator_worse_than_untrained_reads_higher_never_a_fraction_lower():
    assert versus_untrained(300.0, 250.0) == "1.2x higher"
    line = summary_line(_metrics(300.0, 250.0), 10)
    assert "(untrained generator 250.00: 1.2x higher;" in line
    assert "lower" not in line


def test_equal_fids_read_one_times_lower():
    assert versus_untrained(5.0, 5.0) == "1.0x lower"
