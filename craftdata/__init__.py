"""Offline datasets for PaddleCraft: sklearn digits, MNIST from local files, minibatching.

Nothing in this package downloads anything.
"""

from craftdata.batches import iterate_minibatches
from craftdata.digits import Dataset, Split, load_digits, stratified_split
from craftdata.mnist import load_mnist, read_idx, read_mnist_csv

__all__ = [
    "Dataset",
    "Split",
    "iterate_minibatches",
    "load_digits",
    "load_mnist",
    "read_idx",
    "read_mnist_csv",
    "stratified_split",
]
