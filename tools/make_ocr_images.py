"""Render pdlite's OCR image set with known ground truth: examples/images/*.png|jpg + ground_truth.json.

Usage: python tools/make_ocr_images.py [--out examples/images]

Every image is drawn with Pillow from fixed text (seeded, so the set is reproducible given the same fonts):
several fonts (DejaVu Sans/Serif/Mono, Noto Sans/Serif CJK, WenQuanYi Micro Hei), sizes, colours and
backgrounds, a whole-image rotation, lines upside down (the direction classifier's job), a perspective "photo"
with blur, noise and JPEG compression. ground_truth.json maps each file to its lines in reading order:
{"text": ..., "box": [[x, y] x4] (the line's ink box in the final image), "clean": bool}; "clean" marks lines
rendered upright on a plain background with no degradation. tests/apps/test_ocr.py expects every line read
character for character (spaces aside: PP-OCRv4's recogniser drops some between English words).
Fonts: apt-get install fonts-dejavu-core fonts-noto-cjk fonts-wqy-microhei.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = {
    "sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "sans_bold": "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "serif": "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "mono": "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "cjk_sans": "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "cjk_serif": "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc",
    "wqy": "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
}


def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    path = FONTS[name]
    if not os.path.isfile(path):
        raise SystemExit(f"font {path} missing: apt-get install fonts-dejavu-core fonts-noto-cjk fonts-wqy-microhei")
    return ImageFont.truetype(path, size, index=2 if name.startswith("cjk") else 0)  # index 2: the SC face


class Page:
    """A canvas that records the ink box of every line drawn on it."""

    def __init__(self, w: int, h: int, bg: tuple[int, int, int] | Image.Image) -> None:
        self.img = bg.copy() if isinstance(bg, Image.Image) else Image.new("RGB", (w, h), bg)
        self.lines: list[dict] = []

    def text(self, xy: tuple[int, int], text: str, fnt: str, size: int, color=(0, 0, 0), clean: bool = True,
             upside_down: bool = False) -> None:
        f = font(fnt, size)
        x0, y0, x1, y1 = ImageDraw.Draw(self.img).textbbox((0, 0), text, font=f)
        pad = 4
        patch = Image.new("RGBA", (x1 - x0 + 2 * pad, y1 - y0 + 2 * pad), (0, 0, 0, 0))
        ImageDraw.Draw(patch).text((pad - x0, pad - y0), text, font=f, fill=color + (255,))
        if upside_down:
            patch = patch.rotate(180)
        self.img.paste(patch, xy, patch)
        w, h = patch.size
        x, y = xy
        self.lines.append({"text": text, "box": [[x, y], [x + w, y], [x + w, y + h], [x, y + h]],
                           "clean": clean and not upside_down})

    def rotate(self, angle: float, fill) -> None:
        """Rotate the whole page (counter-clockwise degrees, canvas expanded) and the recorded boxes with it."""
        w, h = self.img.size
        self.img = self.img.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=fill)
        nw, nh = self.img.size
        a = np.deg2rad(angle)
        c, s = np.cos(a), np.sin(a)
        for ln in self.lines:
            pts = np.array(ln["box"], dtype=np.float64) - [w / 2, h / 2]
            rot = np.stack([pts[:, 0] * c + pts[:, 1] * s, -pts[:, 0] * s + pts[:, 1] * c], 1) + [nw / 2, nh / 2]
            ln["box"] = np.round(rot).astype(int).tolist()
            ln["clean"] = False


def gradient(w: int, h: int, c0, c1) -> Image.Image:
    t = np.linspace(0, 1, w)[None, :, None]
    arr = (np.array(c0)[None, None] * (1 - t) + np.array(c1)[None, None] * t).repeat(h, 0)
    return Image.fromarray(arr.astype(np.uint8))


def make(out: str) -> dict:
    rng = np.random.default_rng(2024)
    images: dict[str, Page] = {}

    p = Page(800, 600, (255, 255, 255))  # the README sample
    for i, t in enumerate(["pdlite reads text with PP-OCR", "Detection, direction and recognition",
                           "Invoice 2024-0815 Total: $1,234.56", "Hello, world!",
                           "Text in images becomes text you can search", "No framework to install",
                           "Shipped with the package, offline"]):
        p.text((30, 20 + 80 * i), t, "serif", 30)
    images["sample_en.png"] = p

    p = Page(720, 420, (255, 255, 255))
    for i, (t, f) in enumerate([("欢迎使用飞桨轻量推理引擎", "cjk_sans"), ("文字识别效果很好", "wqy"),
                                ("营业时间：周一至周五 9:00-18:00", "cjk_sans"), ("价格：￥128.50元", "cjk_serif"),
                                ("北京 上海 广州 深圳", "wqy")]):
        p.text((40, 30 + 75 * i), t, f, 34)
    images["sample_zh.png"] = p

    p = Page(800, 520, (255, 255, 255))
    for i, (t, f, s) in enumerate([("The quick brown fox jumps over the lazy dog", "serif", 24),
                                   ("PACK MY BOX WITH FIVE DOZEN LIQUOR JUGS", "sans_bold", 28),
                                   ("def main(argv): return 0", "mono", 22),
                                   ("Sphinx of black quartz, judge my vow.", "serif", 30),
                                   ("small print 0123456789", "sans", 16),
                                   ("Large Heading", "sans_bold", 48)]):
        p.text((30, 25 + 80 * i), t, f, s)
    images["fonts_sizes.png"] = p

    bg = gradient(760, 420, (40, 70, 140), (230, 200, 120))
    p = Page(760, 420, bg)
    for i, (t, col) in enumerate([("Coloured text on a gradient", (255, 255, 255)),
                                  ("Yellow warning: keep out", (255, 230, 0)),
                                  ("深色背景上的白色文字", (255, 255, 255)),
                                  ("Dark red 2025-11-25", (120, 0, 0))]):
        p.text((40, 40 + 90 * i), t, "cjk_sans" if any(ord(ch) > 127 for ch in t) else "sans", 30, col, clean=False)
    images["colours.png"] = p

    p = Page(700, 380, (250, 248, 240))
    for i, t in enumerate(["A page turned by seven degrees", "Rotation is handled by the boxes",
                           "and the perspective crop", "旋转的文字也能识别"]):
        p.text((40, 40 + 80 * i), t, "cjk_sans" if any(ord(ch) > 127 for ch in t) else "serif", 28)
    p.rotate(7, (250, 248, 240))
    images["rotated.png"] = p

    p = Page(720, 400, (255, 255, 255))
    for i, (t, ud) in enumerate([("This line is upright", False), ("This one is upside down", True),
                                 ("Direction classifier at work", True), ("方向分类器把它转正", True),
                                 ("Back to normal", False)]):
        p.text((40, 30 + 72 * i), t, "cjk_sans" if any(ord(ch) > 127 for ch in t) else "sans", 28, upside_down=ud)
    images["upside_down.png"] = p

    p = Page(640, 560, (255, 255, 255))
    p.text((60, 25), "RECEIPT", "sans_bold", 34)
    for i, cells in enumerate([("Coffee", "x2", "7.00"), ("Bagel", "x1", "3.25"), ("Tax", "", "0.82"),
                               ("TOTAL", "", "11.07")]):
        for x, t in zip((60, 260, 420), cells):
            if t:
                p.text((x, 100 + 70 * i), t, "mono", 26)
    p.text((60, 390), "Thank you!", "serif", 28)
    p.text((60, 460), "谢谢惠顾，欢迎再来", "cjk_sans", 28)
    images["receipt.png"] = p

    # a "photo": a page seen at an angle, blurred, with noise, saved as JPEG
    p = Page(760, 460, (235, 232, 225))
    for i, t in enumerate(["Photographed page with blur", "and sensor noise in it", "拍照的文字 带有噪声",
                           "Meeting at 10:30 in room B2"]):
        p.text((50, 40 + 95 * i), t, "cjk_sans" if any(ord(ch) > 127 for ch in t) else "sans", 32, (30, 30, 30))
    import cv2  # perspective warp (cv2 is in the ocr extra)

    src = np.float32([[0, 0], [760, 0], [760, 460], [0, 460]])
    dst = np.float32([[30, 20], [740, 0], [760, 460], [0, 430]])
    m = cv2.getPerspectiveTransform(src, dst)
    arr = cv2.warpPerspective(np.asarray(p.img), m, (760, 460), borderValue=(90, 90, 90))
    for ln in p.lines:
        pts = cv2.perspectiveTransform(np.float32([ln["box"]]), m)[0]
        ln["box"] = np.round(pts).astype(int).tolist()
        ln["clean"] = False
    img = Image.fromarray(arr).filter(ImageFilter.GaussianBlur(0.8))
    arr = np.asarray(img).astype(np.float32) + rng.normal(0, 6, (460, 760, 3))
    p.img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    images["photo.jpg"] = p

    os.makedirs(out, exist_ok=True)
    gt = {}
    for name, page in images.items():
        path = os.path.join(out, name)
        if name.endswith(".jpg"):
            page.img.save(path, quality=85)
        else:
            page.img.save(path, optimize=True)
        gt[name] = page.lines
    with open(os.path.join(out, "ground_truth.json"), "w", encoding="utf-8") as f:
        json.dump(gt, f, ensure_ascii=False, indent=1)
    return gt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "examples", "images"))
    args = ap.parse_args()
    gt = make(args.out)
    print(f"{len(gt)} images, {sum(len(v) for v in gt.values())} lines -> {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
