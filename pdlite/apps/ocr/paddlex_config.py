"""PaddleOCR model folders as pdlite's OCR app reads them.

Two kinds exist:

- **PaddleX / PaddleOCR 3** folders (what PaddleOCR 3 downloads and `export_model.py` writes since 2.9):
  `inference.json` (PIR) or `inference.pdmodel` (legacy), `inference.pdiparams`, and `inference.yml` with
  `Global.model_name`, `PreProcess.transform_ops` and `PostProcess` (for recognisers the `character_dict`).
- **PaddleOCR 2.x** folders: `inference.pdmodel` + `inference.pdiparams`, the dictionary a separate file.

`read_model_folder` tells them apart; the `*_settings` functions turn an `inference.yml` into the parameters
of each stage, the way PaddleX's predictors read them (paddlex/inference/models/text_detection/predictor.py,
text_recognition/predictor.py, image_classification/predictor.py).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdlite.apps.ocr._deps import require
from pdlite.errors import ConfigError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
ROLES = {  # role -> (what PaddleOCR calls it, the PostProcess it needs, the CLI option)
    "det": ("text detection", "DBPostProcess", "--det-model"),
    "rec": ("text recognition", "CTCLabelDecode", "--rec-model"),
    "textline": ("text line orientation", "Topk", "--textline-orientation-model"),
    "doc": ("document orientation", "Topk", "--doc-orientation-model"),
}


@dataclass(frozen=True)
class ModelFolder:
    """A model folder: its path and, for PaddleX / PaddleOCR 3 folders, the parsed `inference.yml`."""

    path: Path
    config: dict[str, Any] | None = None

    @property
    def paddlex(self) -> bool:
        """True for a PaddleX / PaddleOCR 3 folder (it has an inference.yml)."""
        return self.config is not None

    @property
    def model_name(self) -> str | None:
        return ((self.config or {}).get("Global") or {}).get("model_name")

    def transform(self, name: str) -> dict[str, Any] | None:
        """The arguments of the PreProcess transform `name` ({} when it has none), None when it is absent."""
        for op in ((self.config or {}).get("PreProcess") or {}).get("transform_ops") or []:
            if isinstance(op, dict) and name in op:
                return op[name] or {}
        return None


def read_model_folder(path: str | os.PathLike, role: str) -> ModelFolder:
    """Check that `path` is a Paddle inference model folder and read its inference.yml if it has one."""
    what, post, option = ROLES[role]
    folder = Path(path)
    if not folder.exists():
        raise ConfigError(f"{what} model folder {str(folder)!r} not found ({option})")
    if not folder.is_dir():
        raise ConfigError(f"{what} model {str(folder)!r} is a file; {option} takes the model's folder "
                          "(inference.json or inference.pdmodel, inference.pdiparams, inference.yml)")
    if not (folder / "inference.pdmodel").is_file() and not (folder / "inference.json").is_file():
        raise ConfigError(f"{what} model folder {str(folder)!r} has neither inference.json nor inference.pdmodel "
                          "(a Paddle inference model, as PaddleOCR's export_model.py or PaddleOCR 3 writes it)")
    yml = folder / "inference.yml"
    if not yml.is_file():
        return ModelFolder(folder)
    yaml = require("yaml")
    try:
        config = yaml.safe_load(yml.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{yml}: not a readable inference.yml ({e})") from None
    if not isinstance(config, dict) or not isinstance(config.get("PostProcess"), dict):
        raise ConfigError(f"{yml}: expected a PaddleX inference.yml with PreProcess and PostProcess sections")
    found = ModelFolder(folder, config)
    _check_role(found, role, yml)
    return found


def _post_name(config: dict[str, Any]) -> str | None:
    pp = config["PostProcess"]
    return pp.get("name") or ("Topk" if "Topk" in pp else None)


def _check_role(folder: ModelFolder, role: str, yml: Path) -> None:
    """The yml's PostProcess must be the one the role runs; a model given for the wrong role says which it is."""
    what, post, option = ROLES[role]
    got = _post_name(folder.config)
    name = folder.model_name or "?"
    if role in ("textline", "doc") and got == "Topk":
        return
    if got == post:
        return
    for other, (o_what, o_post, o_option) in ROLES.items():
        if got == o_post and other != role and o_post != "Topk":
            raise ConfigError(f"{yml}: {name} is a {o_what} model (PostProcess {got}), given as the {what} model; "
                              f"pass it with {o_option}")
    raise ConfigError(f"{yml}: {name} has PostProcess {got!r}; pdlite ocr runs {what} models with {post} "
                      f"({option})")


def _number(value: Any, what: str) -> float:
    """A yml number; PaddleOCR writes the normalisation scale as the string '1./255.'."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(?:/\s*([0-9.eE+-]+)\s*)?", value)
        if m:
            try:
                num = float(m.group(1))
                return num / float(m.group(2)) if m.group(2) else num
            except (ValueError, ZeroDivisionError):
                pass
    raise ConfigError(f"{what}: expected a number or 'a/b', got {value!r}")


def normalize_settings(folder: ModelFolder, default_scale: float = 1 / 255) -> tuple[float, tuple, tuple]:
    """(scale, mean, std) of the folder's NormalizeImage (ImageNet's mean/std and 1/255 when absent)."""
    args = folder.transform("NormalizeImage") or {}
    where = f"{folder.path / 'inference.yml'}: NormalizeImage"
    scale = _number(args.get("scale", default_scale), f"{where}.scale")
    mean = tuple(_number(v, f"{where}.mean") for v in args.get("mean", IMAGENET_MEAN))
    std = tuple(_number(v, f"{where}.std") for v in args.get("std", IMAGENET_STD))
    if len(mean) != 3 or len(std) != 3 or 0.0 in std:
        raise ConfigError(f"{where}: expected 3 means and 3 non-zero stds, got mean {mean}, std {std}")
    return scale, mean, std


def image_mode(folder: ModelFolder) -> str:
    """The channel order a PaddleX det / rec model reads: its yml's DecodeImage.img_mode, else PaddleX's default
    (its predictors read images as RGB unless the yml says otherwise); PaddleOCR's exports say BGR."""
    args = folder.transform("DecodeImage")
    mode = "RGB" if args is None else str(args.get("img_mode", "BGR")).upper()
    if mode not in ("BGR", "RGB"):
        raise ConfigError(f"{folder.path / 'inference.yml'}: DecodeImage.img_mode {mode!r}: expected BGR or RGB")
    return mode


def det_settings(folder: ModelFolder) -> dict[str, Any]:
    """DB post-processing settings the yml fixes (PaddleX's pipeline passes thresh, box_thresh, unclip_ratio)."""
    pp = folder.config["PostProcess"]
    box_type = pp.get("box_type", "quad")
    if box_type != "quad":
        raise ConfigError(f"{folder.path / 'inference.yml'}: PostProcess.box_type {box_type!r}: pdlite ocr reads "
                          "quadrilateral text boxes ('quad'; curved 'poly' boxes are PaddleOCR's seal pipeline)")
    score_mode = pp.get("score_mode", "fast")
    if score_mode not in ("fast", "slow"):
        raise ConfigError(f"{folder.path / 'inference.yml'}: PostProcess.score_mode must be 'fast' or 'slow', "
                          f"got {score_mode!r}")
    return {"max_candidates": int(pp.get("max_candidates", 1000)), "use_dilation": bool(pp.get("use_dilation",
            False)), "score_mode": score_mode}


def rec_settings(folder: ModelFolder) -> tuple[list[int], list[str]]:
    """(image_shape [C, H, W], the characters of the dictionary) of a PaddleX recogniser."""
    yml = folder.path / "inference.yml"
    args = folder.transform("RecResizeImg")
    shape = [3, 48, 320] if args is None else args.get("image_shape", [3, 48, 320])
    if not isinstance(shape, (list, tuple)) or len(shape) != 3:
        raise ConfigError(f"{yml}: RecResizeImg.image_shape must be [C, H, W], got {shape!r}")
    chars = folder.config["PostProcess"].get("character_dict")
    if not isinstance(chars, list) or not chars:
        raise ConfigError(f"{yml}: PostProcess.character_dict must list the recogniser's characters")
    return [int(v) for v in shape], ["" if c is None else str(c) for c in chars]


def cls_settings(folder: ModelFolder) -> dict[str, Any]:
    """An image classifier's pre-processing (ResizeImage size / resize_short, CropImage, NormalizeImage) and
    its labels (PostProcess.Topk.label_list)."""
    yml = folder.path / "inference.yml"
    resize = folder.transform("ResizeImage") or {}
    size, short = resize.get("size"), resize.get("resize_short")
    if size is None and short is None:
        raise ConfigError(f"{yml}: ResizeImage needs size or resize_short")
    if size is not None:
        size = [int(size), int(size)] if isinstance(size, (int, float)) else [int(v) for v in size]
    crop = folder.transform("CropImage")
    crop_size = None if crop is None else crop.get("size", 224)
    if crop_size is not None:
        crop_size = [int(crop_size)] * 2 if isinstance(crop_size, (int, float)) else [int(v) for v in crop_size]
    interp = str(resize.get("interpolation", "LINEAR")).upper()
    if interp not in ("NEAREST", "LINEAR", "BICUBIC", "AREA", "LANCZOS4"):
        raise ConfigError(f"{yml}: ResizeImage.interpolation {interp!r} is not one of OpenCV's")
    labels = (folder.config["PostProcess"].get("Topk") or {}).get("label_list")
    if not labels:
        raise ConfigError(f"{yml}: PostProcess.Topk.label_list must name the classes")
    return {"size": size, "resize_short": None if short is None else int(short), "crop": crop_size,
            "interpolation": interp, "normalize": normalize_settings(folder), "labels": [str(v) for v in labels]}
