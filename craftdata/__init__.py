"""Offline datasets for PaddleCraft: sklearn digits, MNIST from local files, your own image
folders, caption files and speech transcripts (decoded lazily), minibatching.

Nothing in this package downloads anything.
"""

from craftdata.badfiles import BadDataError, BadFiles
from craftdata.batches import iterate_minibatches
from craftdata.captions import load_captions
from craftdata.digits import Dataset, Split, load_digits, stratified_split
from craftdata.image_folder import load_image_folder
from craftdata.loader import BatchLoader, LazySplit
from craftdata.mnist import load_mnist, read_idx, read_mnist_csv
from craftdata.shapes import load_shapes, load_shapes_classes
from craftdata.speech import load_spoken_digits, synthesize
from craftdata.transcripts import load_transcripts
from craftdata.wav import load_wav_folder

__all__ = [
    "BadDataError",
    "BadFiles",
    "BatchLoader",
    "Dataset",
    "LazySplit",
    "Split",
    "iterate_minibatches",
    "load_captions",
    "load_digits",
    "load_image_folder",
    "load_mnist",
    "load_shapes",
    "load_shapes_classes",
    "load_spoken_digits",
    "load_transcripts",
    "load_wav_folder",
    "read_idx",
    "read_mnist_csv",
    "stratified_split",
    "synthesize",
]
