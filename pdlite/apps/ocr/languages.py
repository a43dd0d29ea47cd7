"""`lang=` / `--lang`: which recogniser reads which language.

pdlite ships one recogniser: PP-OCRv4 mobile with PaddleOCR's Chinese dictionary (`ppocr_keys_v1.txt`, 6623
characters: Chinese, English letters, digits, punctuation), `lang="ch"`. For the other languages PaddleOCR 3
has PP-OCRv5 recognisers with their own dictionaries (en_, latin_, korean_, eslav_, cyrillic_, th_, el_, arabic_,
devanagari_, ta_, te_PP-OCRv5_mobile_rec); pdlite does not download them: it uses the ones installed where
PaddleOCR 3 keeps them (`~/.paddlex/official_models/`, or `$PADDLE_PDX_CACHE_HOME/official_models/`) or in the
folders named by `$PDLITE_OCR_MODELS` (os.pathsep-separated). A language with no installed recogniser is an
error that says what is available.
"""
from __future__ import annotations

import os
from pathlib import Path

from pdlite.errors import ConfigError

_LATIN = ("fr de es it pt nl sv da no fi is pl cs sk sl hr bs sq ro hu tr et lv lt mt ga cy af az id ms tl sw "
          "la oc rs_latin").split()
_ESLAV = ("ru uk be").split()
_CYRILLIC = ("bg mn mk sr rs_cyrillic kk ky tg tt ba cv ab ady kbd ava dar inh che lbe lez tab").split()
_ARABIC = ("ar fa ug ur ps ku sd bal").split()
_DEVANAGARI = ("hi mr ne bh mai ang bho mah sck new gom sa bgc").split()
REC_FOR_LANG: dict[str, str] = {"en": "en_PP-OCRv5_mobile_rec", "korean": "korean_PP-OCRv5_mobile_rec",
                                "th": "th_PP-OCRv5_mobile_rec", "el": "el_PP-OCRv5_mobile_rec",
                                "ta": "ta_PP-OCRv5_mobile_rec", "te": "te_PP-OCRv5_mobile_rec",
                                "chinese_cht": "PP-OCRv5_mobile_rec", "japan": "PP-OCRv5_mobile_rec"}
for _codes, _name in ((_LATIN, "latin"), (_ESLAV, "eslav"), (_CYRILLIC, "cyrillic"), (_ARABIC, "arabic"),
                      (_DEVANAGARI, "devanagari")):
    REC_FOR_LANG[_name] = f"{_name}_PP-OCRv5_mobile_rec"
    for _code in _codes:
        REC_FOR_LANG[_code] = f"{_name}_PP-OCRv5_mobile_rec"
SHIPPED = ("ch",)  # the PP-OCRv4 models inside the package
DET_NAMES = ("PP-OCRv5_mobile_det", "PP-OCRv5_server_det")  # what PaddleOCR 3 pairs with its v5 recognisers


def model_homes() -> list[Path]:
    """Where installed PaddleOCR 3 / PaddleX models are looked for, in order."""
    homes = [Path(p) for p in os.environ.get("PDLITE_OCR_MODELS", "").split(os.pathsep) if p]
    pdx = os.environ.get("PADDLE_PDX_CACHE_HOME")
    homes.append((Path(pdx) if pdx else Path.home() / ".paddlex") / "official_models")
    return homes


def find_installed(name: str) -> Path | None:
    """The folder of the installed model `name` (with an inference.yml), or None."""
    for home in model_homes():
        for cand in (home / name, home / f"{name}_infer"):
            if (cand / "inference.yml").is_file():
                return cand
    return None


def available() -> dict[str, str]:
    """lang -> what reads it, for every language usable now (the shipped one and the installed ones)."""
    out = {"ch": "shipped PP-OCRv4 (Chinese, English letters, digits, punctuation)"}
    for lang, name in sorted(REC_FOR_LANG.items()):
        path = find_installed(name)
        if path is not None:
            out[lang] = f"{name} ({path})"
    return out


def resolve(lang: str) -> tuple[Path | None, Path | None]:
    """(det folder, rec folder) for `lang`; (None, None) means the shipped models."""
    if lang in SHIPPED:
        return None, None
    name = REC_FOR_LANG.get(lang)
    have = available()
    have_txt = "; ".join(f"{k}: {v}" for k, v in have.items())
    if name is None:
        raise ConfigError(f"lang {lang!r}: not a language PaddleOCR 3 has a recogniser for. Available here: "
                          f"{have_txt}. Or pass your own models (--det-model / --rec-model)")
    rec = find_installed(name)
    if rec is None:
        homes = ", ".join(str(h) for h in model_homes())
        raise ConfigError(f"lang {lang!r} needs the recogniser {name}, which is not installed (looked in {homes}; "
                          f"PaddleOCR 3 downloads it there, or set PDLITE_OCR_MODELS to a folder holding {name}/). "
                          f"Available here: {have_txt}. Or pass its folder with --rec-model")
    det = next((p for p in (find_installed(n) for n in DET_NAMES) if p is not None), None)
    return det, rec
