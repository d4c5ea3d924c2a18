"""``avdgp export``: a saved model as a TensorFlow SavedModel for serving."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CommandLineError
from .common import one_line, print_stage, write_failure
from .saved_run import read_saved_run

__all__ = ["export_command"]


def _check_export_dir(value: str) -> None:
    path = Path(value)
    if path.is_symlink():
        raise CommandLineError(
            f"avdgp export: EXPORT_DIR {value}: is a symbolic link (to {os.readlink(path)}); "
            "name the folder itself"
        )
    if path.exists() and not path.is_dir():
        raise CommandLineError(f"avdgp export: EXPORT_DIR {value}: is a file, expected a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / "saved_model.pb").is_file():
        raise CommandLineError(
            f"avdgp export: EXPORT_DIR {value}: is a non-empty folder that holds no export; "
            "choose a new folder (a previous export is overwritten)"
        )
    existing = next((p for p in [path, *path.absolute().parents] if p.exists()), Path("."))
    if not os.access(existing, os.W_OK):
        raise CommandLineError(f"avdgp export: EXPORT_DIR {value}: {existing} is not writable")


def export_command(args) -> int:
    _check_export_dir(args.export_dir)
    saved = read_saved_run(args.model_dir, "export")
    print_stage(args, f"loading the {saved.label} model of {args.model_dir}")
    model = saved.load_model()
    import tensorflow as tf

    from gpflux_avdgp.io.named_inputs import check_feature_names
    from gpflux_avdgp.io.serving import export, signature_names

    from ..training import float_type

    extra = {
        "task": saved.task,
        "label": saved.label,
        "target_name": saved.data.get("target_name"),
        "classes": saved.data.get("classes"),
    }
    names, by_name = saved.data.get("feature_names"), ""
    try:  # a header TensorFlow cannot take as input names: positional signatures only
        check_feature_names(names, saved.num_features)
    except ValueError as error:
        extra["feature_names_not_served"] = list(names)
        names, by_name = None, f"; not served by name: {one_line(error)}"
    signatures = signature_names(by_name=bool(names))
    print_stage(args, f"tracing its {len(signatures)} signatures into {args.export_dir}")
    try:
        with float_type(saved.dtype):
            path = export(
                model,
                args.export_dir,
                standardizer=saved.standardizer,
                metadata=extra,
                feature_names=names,
            )
    except (OSError, tf.errors.OpError) as error:  # nothing is left under EXPORT_DIR's name
        raise write_failure("export", f"EXPORT_DIR {args.export_dir}", error) from None
    served = "outputs in original units"
    if saved.task == "classification":
        served = "predict_y's mean: the class probabilities, the labels in metadata()'s classes"
    inputs = f"x [N, {saved.num_features}] {saved.dtype} raw features"
    if names:
        inputs += f", or by name: {', '.join(names)} [N] each"
    print(
        f"{saved.label}: exported to {path} (signatures {', '.join(signatures)}; input "
        f"{inputs}; {served}{by_name})"
    )
    return 0
