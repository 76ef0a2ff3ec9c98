"""``predict``: an exported model (the case study's ``model.npz``) on images, or, with
``--url``, a model the scheduling service deploys (``POST /models/{name}/predict``)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .args import adder, arg, blame, existing_file
from .common import EXIT_OK, CliError, located, one_line, write

add_predict = adder(
    arg("model", metavar="MODEL",
        help="model file (.npz); with --url, the name of a model the service deploys"),
    arg("images", metavar="IMAGES", type=existing_file,
        help="raw images as a NumPy .npy array, one row per image (digits: 64 pixels in "
             "0..16, flat or 8x8)"),
    arg("--labels", type=existing_file, metavar="LABELS",
        help="their labels (.npy): print the accuracy instead of the predictions"),
    arg("--url", metavar="URL", help="ask the service at URL (its deployed model MODEL) "
        "instead of reading a model file"),
    arg("--version", type=int, metavar="V",
        help="with --url: the model's version (default: the last deployed)"),
    arg("--out", metavar="JSON", help="write the predictions as JSON"))


def _array(path: str, field: str) -> Any:
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise CliError(field, f"not a NumPy .npy array: {path} ({one_line(str(e))})") from None


def _from_file(args: argparse.Namespace, images: Any) -> tuple[Any, str]:
    """The predictions of the model file MODEL, and what made them."""
    from ..model.io import FormatError
    from ..training.export import load_model

    if not Path(args.model).is_file():
        raise CliError("MODEL", f"no such file: {args.model!r} (a model the service deploys "
                       "needs --url)")
    try:
        model = load_model(args.model)
    except FormatError as e:
        raise located(e, args.model) from None
    try:
        return model.predict(images), f"model {model.meta.get('job', model.task)}"
    except ValueError as e:
        raise blame(e, {"images": "IMAGES"}, "IMAGES") from None


def _from_service(args: argparse.Namespace, images: Any) -> tuple[Any, str]:
    """The predictions of the service's model MODEL, and which version made them."""
    import numpy as np

    from ..service.client import ServiceError, request

    body: dict[str, Any] = {"images": np.asarray(images).reshape(len(images), -1).tolist()}
    if args.version is not None:
        body["version"] = args.version
    try:
        got = request("POST", args.url, f"/models/{args.model}/predict", json=body,
                      timeout=120.0)
    except ServiceError as e:
        field = {"images": "IMAGES", "name": "MODEL", "version": "--version"}.get(e.field,
                                                                                 e.field)
        raise CliError(field, e.message) from None
    return np.asarray(got["labels"]), f"model {got['name']} version {got['version']}"


def predict(args: argparse.Namespace) -> int:
    import numpy as np

    if args.version is not None and args.url is None:
        raise CliError("--version", "only with --url (a model file has one version)")
    images = _array(args.images, "IMAGES")
    predicted, source = (_from_service if args.url else _from_file)(args, images)
    labels = None if args.labels is None else _array(args.labels, "--labels")
    if labels is not None and np.shape(labels) != (len(images),):
        raise CliError("--labels", f"expected {len(images)} labels (one per image), got an "
                       f"array of shape {np.shape(labels)}")
    if args.out:
        def save(doc: dict, path: str) -> None:
            Path(path).write_text(json.dumps(doc) + "\n")

        write(args.out, save, {"model": args.model, "predictions": predicted.tolist()})
    if labels is not None:
        hits = int(np.sum(predicted == labels))
        print(f"accuracy {hits / len(labels):.4f} ({hits} of {len(labels)} images, {source})")
    elif not args.out:
        print("\n".join(map(str, predicted.tolist())))
    return EXIT_OK


COMMANDS = {"predict": (add_predict, predict)}
