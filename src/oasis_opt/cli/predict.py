"""``predict``: an exported model (the case study's ``model.npz``) on images."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .args import adder, arg, blame, existing_file
from .common import EXIT_OK, CliError, located, one_line, write

add_predict = adder(
    arg("model", metavar="MODEL", type=existing_file, help="model file (.npz)"),
    arg("images", metavar="IMAGES", type=existing_file,
        help="raw images as a NumPy .npy array, one row per image (digits: 64 pixels in "
             "0..16, flat or 8x8)"),
    arg("--labels", type=existing_file, metavar="LABELS",
        help="their labels (.npy): print the accuracy instead of the predictions"),
    arg("--out", metavar="JSON", help="write the predictions as JSON"))


def predict(args: argparse.Namespace) -> int:
    import numpy as np

    from ..training.export import load_model
    from ..model.io import FormatError

    try:
        model = load_model(args.model)
    except FormatError as e:
        raise located(e, args.model) from None

    def array(path: str, field: str) -> Any:
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CliError(field, f"not a NumPy .npy array: {path} ({one_line(str(e))})") \
                from None

    images = array(args.images, "IMAGES")
    try:
        predicted = model.predict(images)
        labels = None if args.labels is None else array(args.labels, "--labels")
        if labels is not None:
            accuracy = model.accuracy(images, labels)
    except ValueError as e:
        raise blame(e, {"images": "IMAGES", "labels": "--labels"}, "IMAGES") from None
    if args.out:
        def save(doc: dict, path: str) -> None:
            Path(path).write_text(json.dumps(doc) + "\n")

        write(args.out, save, {"model": args.model, "predictions": predicted.tolist()})
    if labels is not None:
        hits = int(np.sum(predicted == labels))
        print(f"accuracy {accuracy:.4f} ({hits} of {len(labels)} images, model "
              f"{model.meta.get('job', model.task)})")
    elif not args.out:
        print("\n".join(map(str, predicted.tolist())))
    return EXIT_OK


COMMANDS = {"predict": (add_predict, predict)}
