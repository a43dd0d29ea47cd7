"""A folder of varied OCR images with known text, for benchmarks/ocr_bench.py (--images DIR).

Usage: python benchmarks/ocr_varied_images.py OUT_DIR [--count 40] [--seed 0]

Seeded pages of many sizes (320-1400 px wide), each with 1-8 lines of English words, numbers and prices in
DejaVu Sans/Serif/Mono (16-44 px), dark text on light plain or graded backgrounds, some lines indented: every
image gives the detector a new page size and the recogniser new line widths (what `pdlite ocr DIR` meets on a
real folder; examples/images has 8). Drawn with tools/make_ocr_images.py's Page, which records each line's ink
box; ground_truth.json as examples/images' ({"text", "box", "clean"} per line, in reading order).
Fonts: apt-get install fonts-dejavu-core.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from make_ocr_images import Page, font, gradient  # noqa: E402

WORDS = ("invoice total amount order number date customer account balance payment due shipping address city "
         "street phone email reference item quantity price tax discount subtotal receipt store open hours "
         "monday friday welcome thank you visit again station platform train departure arrival gate flight "
         "seat class ticket valid until batch serial model version update system report page chapter section "
         "figure table summary notes").split()
FACES = ("sans", "sans_bold", "serif", "mono")


def line_text(rng: np.random.Generator) -> str:
    kind = rng.integers(0, 4)
    words = [str(w) for w in rng.choice(WORDS, int(rng.integers(1, 6)))]
    if kind == 1:
        words.append(f"{rng.integers(1, 9999)}")
    elif kind == 2:
        words.append(f"${rng.integers(1, 999)}.{rng.integers(0, 99):02d}")
    elif kind == 3:
        words.insert(0, f"{rng.integers(2000, 2030)}-{rng.integers(1, 12):02d}-{rng.integers(1, 28):02d}")
    text = " ".join(words)
    return text[0].upper() + text[1:]


def page(rng: np.random.Generator) -> Page:
    w = int(rng.integers(320, 1400))
    lines = int(rng.integers(1, 9))
    sizes = [int(rng.integers(16, 45)) for _ in range(lines)]
    h = int(sum(s * 1.9 for s in sizes) + rng.integers(40, 200))
    light = tuple(int(v) for v in rng.integers(225, 256, 3))
    bg = gradient(w, h, light, tuple(int(v) for v in rng.integers(200, 256, 3))) if rng.random() < 0.3 else light
    p = Page(w, h, bg)
    y = int(rng.integers(10, 40))
    for size in sizes:
        face = str(rng.choice(FACES))
        text = line_text(rng)
        while len(text) > 3 and font(face, size).getlength(text) + 40 > w:  # the line fits the page
            text = text.rsplit(" ", 1)[0] if " " in text else text[:-1]
        x = int(rng.integers(10, max(11, w - int(font(face, size).getlength(text)) - 20)))
        color = tuple(int(v) for v in rng.integers(0, 90, 3))
        p.text((x, y), text, face, size, color)
        y += int(size * 1.9)
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    truth = {}
    for i in range(args.count):
        p = page(rng)
        name = f"page_{i:03d}.png"
        p.img.save(os.path.join(args.out, name))
        truth[name] = p.lines
    with open(os.path.join(args.out, "ground_truth.json"), "w", encoding="utf-8") as f:
        json.dump(truth, f, ensure_ascii=False, indent=1)
    print(f"{args.count} images, {sum(len(v) for v in truth.values())} lines in {args.out}")


if __name__ == "__main__":
    main()
