"""Hand-written Keras reference: the pytorch/examples MNIST network, trained for throughput."""

import sys
from pathlib import Path

import keras
from keras import layers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keras_common import cosine, parse_args, train  # noqa: E402


def build(shape: tuple[int, ...]) -> keras.Model:
    return keras.Sequential([
        keras.Input(shape),
        layers.Conv2D(32, 3, activation="relu"),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Dropout(0.25),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(10),
    ])


if __name__ == "__main__":
    args = parse_args(__doc__)
    keras.utils.set_random_seed(0)
    train(build, keras.optimizers.AdamW(cosine(args.steps, 1e-3), weight_decay=0.01, epsilon=1e-8), args)
