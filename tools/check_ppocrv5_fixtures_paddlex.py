"""Cross-check of tests/fixtures/ocr/ppocrv5/expected.json with PaddleX's own OCR pipeline (what PaddleOCR 3 runs).

tools/gen_ppocrv5_fixtures.py computes the expectations with its transcription of PaddleOCR 3's pipeline; this
script runs the real one, PaddleX's `create_pipeline` with PaddleOCR 3's defaults (OCR.yaml: det 64 'min' / 4000,
thresh 0.3, box_thresh 0.6, unclip 1.5, textline + rec batches of 6, score threshold 0) on the fixture folders,
and compares every line (text, box exactly, score within 1e-4). Needs paddlepaddle and PaddleX (3.3.13 checked),
e.g. without its download and document dependencies:

    pip install --no-deps --target /tmp/pdx "paddlex==3.3.13" chardet colorlog prettytable py-cpuinfo ruamel.yaml \\
        ruamel.yaml.clib ujson imagesize python-bidi pypdfium2 shapely
    # PaddleX checks `opencv-contrib-python` by its metadata; opencv-python-headless has the same cv2
    PYTHONPATH=/tmp/pdx DISABLE_MODEL_SOURCE_CHECK=True python tools/check_ppocrv5_fixtures_paddlex.py \\
        legacy pir pir+doc pir+b1

`--v4-reference` instead writes tests/fixtures/ocr/paddleocr3_v4/reference.json: PaddleX's pipeline with the
shipped PP-OCRv4 det and rec as PaddleOCR 3 folders (their files + the inference.yml files beside that JSON) on
examples/images (trained models: real text).

The model hubs PaddleX imports at start (huggingface_hub, modelscope, aistudio_sdk) are stubbed here (the folders are
local); the predictors run Paddle Inference without oneDNN (run_mode "paddle", 1 thread: PaddleX's default oneDNN
path fails on these programs in Paddle 3.3.1). Result on 2026-12-07: every line of every variant the same.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import json
import sys
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "ocr" / "ppocrv5"


class _Any:
    def __getattr__(self, name: str) -> _Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()

    def __call__(self, *args: object, **kwargs: object) -> _Any:
        return _Any()


class _HubStubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty stand-ins for the model hubs PaddleX imports at start and does not use for local folders."""

    PREFIXES = ("huggingface_hub", "modelscope", "aistudio_sdk")

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.PREFIXES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []

        def attr(name: str) -> _Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Any()

        mod.__getattr__ = attr
        return mod

    def exec_module(self, module) -> None:
        pass


def pipeline(variant: str):
    from paddlex import create_pipeline
    from paddlex.inference.utils.pp_option import PaddlePredictorOption

    fmt = variant.split("+")[0]
    sub = {"TextDetection": {"module_name": "text_detection", "model_name": "PP-OCRv5_mobile_det",
                             "model_dir": str(FIX / "det" / fmt), "limit_side_len": 64, "limit_type": "min",
                             "max_side_limit": 4000, "thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 1.5},
           "TextLineOrientation": {"module_name": "textline_orientation", "model_name": "PP-LCNet_x0_25_textline_ori",
                                   "model_dir": str(FIX / "textline" / fmt), "batch_size": 6},
           "TextRecognition": {"module_name": "text_recognition", "model_name": "en_PP-OCRv5_mobile_rec",
                               "model_dir": str(FIX / "rec" / fmt), "batch_size": 1 if variant.endswith("+b1") else 6,
                               "score_thresh": 0.0}}
    cfg = {"pipeline_name": "OCR", "text_type": "general", "use_doc_preprocessor": variant.endswith("+doc"),
           "use_textline_orientation": True, "SubModules": sub}
    if variant.endswith("+doc"):
        cfg["SubPipelines"] = {"DocPreprocessor": {
            "pipeline_name": "doc_preprocessor", "use_doc_orientation_classify": True, "use_doc_unwarping": False,
            "SubModules": {"DocOrientationClassify": {"module_name": "doc_text_orientation",
                                                      "model_name": "PP-LCNet_x1_0_doc_ori",
                                                      "model_dir": str(FIX / "doc" / fmt)}}}}
    opt = PaddlePredictorOption()
    opt.run_mode, opt.cpu_threads = "paddle", 1
    return create_pipeline(config=cfg, device="cpu", pp_option=opt)


def check(variant: str, expected: dict) -> bool:
    ocr, good = pipeline(variant), True
    for key, want in expected.items():
        if key.partition("/")[0] != variant:
            continue
        name = key.partition("/")[2]
        res = list(ocr.predict(str(REPO / "examples" / "images" / name)))[0]
        got = list(zip(res["rec_texts"], res["rec_scores"], res["rec_polys"]))
        same = len(got) == len(want) and all(
            t == w["text"] and np.array_equal(np.array(b), np.array(w["box"])) and abs(s - w["score"]) <= 1e-4
            for (t, s, b), w in zip(got, want))
        if variant.endswith("+doc"):
            same = same and res["doc_preprocessor_res"]["angle"] == expected["doc_angles"][name]
        print(f"{key}: {len(got)} lines, {'the same' if same else 'DIFFERENT'}")
        good = good and same
    return good


V4 = REPO / "tests" / "fixtures" / "ocr" / "paddleocr3_v4"


def v4_folders(dst: Path) -> dict[str, Path]:
    """The shipped PP-OCRv4 det and rec as PaddleOCR 3 folders: their files plus an inference.yml each."""
    import shutil

    models = REPO / "pdlite" / "apps" / "ocr" / "models"
    out = {}
    for kind, src in (("det", "ch_PP-OCRv4_det_infer"), ("rec", "ch_PP-OCRv4_rec_infer")):
        shutil.copytree(models / src, dst / kind)
        shutil.copy(V4 / f"{kind}.inference.yml", dst / kind / "inference.yml")
        out[kind] = dst / kind
    return out


def v4_reference() -> None:
    """PaddleX's OCR pipeline (PaddleOCR 3's defaults, no orientation models) with the shipped PP-OCRv4 models as
    PaddleOCR 3 folders on examples/images: tests/fixtures/ocr/paddleocr3_v4/reference.json."""
    import tempfile

    from paddlex import create_pipeline
    from paddlex.inference.utils.pp_option import PaddlePredictorOption

    with tempfile.TemporaryDirectory() as tmp:
        dirs = v4_folders(Path(tmp))
        sub = {"TextDetection": {"module_name": "text_detection", "model_name": "PP-OCRv4_mobile_det",
                                 "model_dir": str(dirs["det"]), "limit_side_len": 64, "limit_type": "min",
                                 "max_side_limit": 4000, "thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 1.5},
               "TextRecognition": {"module_name": "text_recognition", "model_name": "PP-OCRv4_mobile_rec",
                                   "model_dir": str(dirs["rec"]), "batch_size": 6, "score_thresh": 0.0}}
        opt = PaddlePredictorOption()
        opt.run_mode, opt.cpu_threads = "paddle", 1
        ocr = create_pipeline(config={"pipeline_name": "OCR", "text_type": "general", "use_doc_preprocessor": False,
                                      "use_textline_orientation": False, "SubModules": sub},
                              device="cpu", pp_option=opt)
        rows = []
        for path in sorted((REPO / "examples" / "images").glob("*.*")):
            if path.suffix not in (".png", ".jpg"):
                continue
            res = list(ocr.predict(str(path)))[0]
            lines = [{"box": np.array(b).tolist(), "text": t, "score": round(float(s), 6)}
                     for t, s, b in zip(res["rec_texts"], res["rec_scores"], res["rec_polys"])]
            rows.append(f'"{path.name}": ' + json.dumps(lines, ensure_ascii=False))
            print(f"{path.name}: {len(lines)} lines")
    (V4 / "reference.json").write_text("{\n" + ",\n".join(rows) + "\n}\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    sys.meta_path.insert(0, _HubStubs())
    print("paddlex", importlib.metadata.version("paddlex"))
    if argv == ["--v4-reference"]:
        v4_reference()
        return 0
    expected = json.loads((FIX / "expected.json").read_text(encoding="utf-8"))
    results = [check(v, expected) for v in (argv or ["legacy", "pir", "pir+doc", "pir+b1"])]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
