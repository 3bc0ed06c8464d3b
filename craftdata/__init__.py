"""Offline datasets for PaddleCraft: sklearn digits, MNIST from local files, your own image
folders, caption files and speech transcripts (decoded lazily), minibatching.

Nothing in this package downloads anything.
"""

from paddlecraft.craftdata.badfiles import BadDataError, BadFiles
from paddlecraft.craftdata.batches import iterate_minibatches
from paddlecraft.craftdata.captions import load_captions
from paddlecraft.craftdata.digits import Dataset, Split, load_digits, stratified_split
from paddlecraft.craftdata.image_folder import load_image_folder
from paddlecraft.craftdata.loader import BatchLoader, LazySplit
from paddlecraft.craftdata.mnist import load_mnist, read_idx, read_mnist_csv
from paddlecraft.craftdata.shapes import load_shapes, load_shapes_classes
from paddlecraft.craftdata.speech import load_spoken_digits, synthesize
from paddlecraft.craftdata.stream import StreamData, load_stream
from paddlecraft.craftdata.transcripts import load_transcripts
from paddlecraft.craftdata.wav import load_wav_folder

__all__ = [
    "BadDataError",
    "BadFiles",
    "BatchLoader",
    "Dataset",
    "LazySplit",
    "Split",
    "StreamData",
    "iterate_minibatches",
    "load_captions",
    "load_digits",
    "load_image_folder",
    "load_mnist",
    "load_shapes",
    "load_shapes_classes",
    "load_spoken_digits",
    "load_stream",
    "load_transcripts",
    "load_wav_folder",
    "read_idx",
    "read_mnist_csv",
    "stratified_split",
    "synthesize",
]
