"""Side-by-side picture of OCR results, like PaddleOCR's `draw_ocr_box_txt`: the image with the boxes filled in
translucent colours on the left, each recognised text drawn into its box on white on the right."""
from __future__ import annotations

import functools
import os
import random
from collections.abc import Sequence

import numpy as np

from pdlite.apps.ocr._deps import require
from pdlite.errors import ConfigError

# fonts with CJK glyphs first (Debian/Ubuntu, Fedora, macOS, Windows), then Latin-only ones
FONT_CANDIDATES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/System/Library/Fonts/PingFang.ttc",
    "/System/Library/Fonts/STHeiti Light.ttc",
    "C:/Windows/Fonts/msyh.ttc",
    "C:/Windows/Fonts/simsun.ttc",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
)


def find_font(font_path: str | os.PathLike | None = None) -> str | None:
    """The given font, else the first system font found (CJK-capable first); None: Pillow's built-in font."""
    if font_path is not None:
        if not os.path.isfile(font_path):
            raise ConfigError(f"font {os.fspath(font_path)!r} does not exist")
        return os.fspath(font_path)
    return next((p for p in FONT_CANDIDATES if os.path.isfile(p)), None)


@functools.lru_cache(maxsize=8)
def _glyph_probe(path: str | None):
    """(font, the bitmap signature of a character no font has): a glyph drawn like it is the font's .notdef."""
    font = _font(path, 24)
    mask = font.getmask("\U0010fffd")
    return font, (mask.size, bytes(mask))


def missing_glyphs(font_path: str | None, texts: Sequence[str], limit: int = 8) -> str:
    """The characters of `texts` (up to `limit`) that the font would draw as its missing-glyph box."""
    font, notdef = _glyph_probe(font_path)
    missing = []
    for ch in dict.fromkeys(c for t in texts for c in t if not c.isspace()):
        mask = font.getmask(ch)
        if (mask.size, bytes(mask)) == notdef:
            missing.append(ch)
            if len(missing) >= limit:
                break
    return "".join(missing)


def _font(path: str | None, size: int):
    image_font = require("PIL.ImageFont")
    size = max(int(size), 6)
    if path is None:
        return image_font.load_default(size)
    return image_font.truetype(path, size)


def _text_in_box(size: tuple[int, int], box: np.ndarray, text: str, font_path: str | None) -> np.ndarray:
    """A white (h, w, 3) canvas with `text` drawn upright in a box-sized patch, warped onto the box."""
    cv2 = require("cv2")
    image, image_draw = require("PIL.Image"), require("PIL.ImageDraw")
    box = np.asarray(box, dtype=np.float32)
    bw = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    bh = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    bw, bh = max(bw, 1), max(bh, 1)
    vertical = bh > 2 * bw and bh > 30
    pw, ph = (bh, bw) if vertical else (bw, bh)
    patch = image.new("RGB", (pw, ph), (255, 255, 255))
    draw = image_draw.Draw(patch)
    if text:
        fsize = int(ph * 0.8)
        font = _font(font_path, fsize)
        length = draw.textlength(text, font=font)
        if length > pw * 0.98:  # shrink to fit the box's width
            font = _font(font_path, fsize * pw * 0.98 / length)
        draw.text((0, ph / 2), text, fill=(0, 0, 0), font=font, anchor="lm")
    arr = np.array(patch)
    if vertical:
        arr = np.asarray(np.rot90(arr, 3), order="C")
    src = np.float32([[0, 0], [bw, 0], [bw, bh], [0, bh]])
    m = cv2.getPerspectiveTransform(src, box)
    return cv2.warpPerspective(arr, m, size, flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT,
                               borderValue=(255, 255, 255))


def draw_ocr(image: np.ndarray, boxes: Sequence[Sequence[Sequence[float]]], texts: Sequence[str],
             font_path: str | os.PathLike | None = None) -> np.ndarray:
    """The BGR image (h, w) and its OCR results side by side: a BGR array (h, 2w)."""
    cv2 = require("cv2")
    image_mod = require("PIL.Image")
    image_draw = require("PIL.ImageDraw")
    font = find_font(font_path)
    h, w = image.shape[:2]
    rgb = image_mod.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
    left = rgb.copy()
    right = np.full((h, w, 3), 255, dtype=np.uint8)
    rnd = random.Random(0)
    draw_left = image_draw.Draw(left)
    for box, text in zip(boxes, texts):
        color = (rnd.randint(0, 255), rnd.randint(0, 255), rnd.randint(0, 255))
        pts = [tuple(map(float, p)) for p in box]
        draw_left.polygon(pts, fill=color)
        canvas = _text_in_box((w, h), np.asarray(box, dtype=np.float32), text, font)
        cv2.polylines(canvas, [np.asarray(box, np.int32).reshape(-1, 1, 2)], True, color, 1)
        right = cv2.bitwise_and(right, canvas)
    left = image_mod.blend(rgb, left, 0.5)
    show = np.full((h, 2 * w, 3), 255, dtype=np.uint8)
    show[:, :w] = np.asarray(left)
    show[:, w:] = right
    return cv2.cvtColor(show, cv2.COLOR_RGB2BGR)
