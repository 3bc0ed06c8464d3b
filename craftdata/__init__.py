"""Offline datasets for PaddleCraft: sklearn digits, MNIST from local files, minibatching.

Nothing in this package downloads anything.
"""

from craftdata.batches import iterate_minibatches
from craftdata.digits import Dataset, Split, load_digits, stratified_split
from craftdata.mnist import load_mnist, read_idx, read_mnist_csv
from craftdata.shapes import load_shapes, load_shapes_classes
from craftdata.speech import load_spoken_digits, synthesize
from craftdata.wav import load_wav_folder

__all__ = [
    "Dataset",
    "Split",
    "iterate_minibatches",
    "load_digits",
    "load_mnist",
    "load_shapes",
    "load_shapes_classes",
    "load_spoken_digits",
    "load_wav_folder",
    "read_idx",
    "read_mnist_csv",
    "stratified_split",
    "synthesize",
]
