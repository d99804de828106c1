#!/usr/bin/env python3
"""Pillow peer for bench/pipeline.sh.

Runs one workload over every input file in one process, the way a Python
service would, and prints the in-process seconds spent on the images
(interpreter start and imports are not counted) as the last stdout line:

    seconds=<float> images=<int>

Workloads:
  p1  decode, exif_transpose, RGB, fill-scale + centre crop to 2048x2048
      (ImageOps.fit, LANCZOS), glitch, save q95 4:4:4, then a 256x256
      ImageOps.fit LANCZOS thumbnail of that result saved at q70.
  t   decode with draft (DCT scaling, leaving a factor of at least 2 for
      LANCZOS, the libvips rule), fill + crop to 256x256, save q70.
  w   as t at 1024x1024, saved as lossy WebP at quality 80 (libwebp's
      other defaults, method 4).
  a   transparent PNG sources, fill + crop to 1024x1024 keeping the alpha
      (Pillow resizes RGBA premultiplied), saved as an RGBA PNG at zlib
      level 6.
  n   PNG sources (no draft: PNG has no DCT scaling), fill + crop to
      1024x1024, save JPEG q80. Any source Pillow opens: GIF, and HEIC
      when pillow-heif is installed (its opener is registered if so).

The glitch is an equivalent in pixel work, not the same picture: the red
channel rolls right and the blue channel rolls left by 1% of the width
(ImageChops.offset), then four seeded horizontal bands, each 1/32 of the
height, roll sideways by up to 5% of the width.
"""
import math
import os
import random
import sys
import time

from PIL import Image, ImageChops, ImageOps

try:  # HEIC sources (workload H), when pillow-heif is installed
    import pillow_heif

    pillow_heif.register_heif_opener()
except ImportError:
    pass

ROTATED = {5, 6, 7, 8}  # EXIF orientations that swap width and height


def draft_for_cover(im, target):
    """Ask libjpeg for DCT scaling, keeping >= 2x the cover size."""
    if im.format != "JPEG":
        return
    w, h = im.size
    try:
        orientation = im.getexif().get(0x0112, 1)
    except Exception:
        orientation = 1
    tw, th = target
    if orientation in ROTATED:
        tw, th = th, tw
    k = max(tw / w, th / h)  # cover scale factor, raw orientation
    want = (max(1, math.ceil(2 * k * w)), max(1, math.ceil(2 * k * h)))
    if w // want[0] >= 2 and h // want[1] >= 2:
        im.draft("RGB", want)


def glitch(im, seed):
    w, h = im.size
    r, g, b = im.split()
    dx = max(1, w // 100)
    r = ImageChops.offset(r, dx, 0)
    b = ImageChops.offset(b, -dx, 0)
    out = Image.merge("RGB", (r, g, b))
    rng = random.Random(seed)
    band_h = max(1, h // 32)
    for _ in range(4):
        y = rng.randrange(0, max(1, h - band_h))
        shift = rng.randint(-(w // 20), w // 20)
        box = (0, y, w, y + band_h)
        out.paste(ImageChops.offset(out.crop(box), shift, 0), box)
    return out


def load_rgb(path, draft_target=None):
    im = Image.open(path)
    if draft_target is not None:
        draft_for_cover(im, draft_target)
    im = ImageOps.exif_transpose(im)
    if im.mode != "RGB":
        im = im.convert("RGB")  # grayscale, CMYK (Adobe inverted handled by Pillow)
    return im


def p1(path, out_dir):
    stem = os.path.splitext(os.path.basename(path))[0]
    im = load_rgb(path)
    full = ImageOps.fit(im, (2048, 2048), Image.Resampling.LANCZOS)
    full = glitch(full, 7)
    full.save(os.path.join(out_dir, stem + ".jpg"), "JPEG", quality=95, subsampling=0)
    thumb = ImageOps.fit(full, (256, 256), Image.Resampling.LANCZOS)
    thumb.save(os.path.join(out_dir, stem + "_thumb.jpg"), "JPEG", quality=70)


def t(path, out_dir):
    stem = os.path.splitext(os.path.basename(path))[0]
    im = load_rgb(path, draft_target=(256, 256))
    thumb = ImageOps.fit(im, (256, 256), Image.Resampling.LANCZOS)
    thumb.save(os.path.join(out_dir, stem + ".jpg"), "JPEG", quality=70)


def w(path, out_dir):
    stem = os.path.splitext(os.path.basename(path))[0]
    im = load_rgb(path, draft_target=(1024, 1024))
    web = ImageOps.fit(im, (1024, 1024), Image.Resampling.LANCZOS)
    web.save(os.path.join(out_dir, stem + ".webp"), "WEBP", quality=80, method=4)


def o(path, out_dir):
    stem = os.path.splitext(os.path.basename(path))[0]
    im = load_rgb(path, draft_target=(1024, 1024))
    web = ImageOps.fit(im, (1024, 1024), Image.Resampling.LANCZOS)
    web.save(os.path.join(out_dir, stem + ".png"), "PNG", compress_level=6)


def n(path, out_dir):
    stem = os.path.splitext(os.path.basename(path))[0]
    im = load_rgb(path)
    web = ImageOps.fit(im, (1024, 1024), Image.Resampling.LANCZOS)
    web.save(os.path.join(out_dir, stem + ".jpg"), "JPEG", quality=80)


def a(path, out_dir):
    stem = os.path.splitext(os.path.basename(path))[0]
    im = Image.open(path)
    im.load()
    web = ImageOps.fit(im.convert("RGBA"), (1024, 1024), Image.Resampling.LANCZOS)
    web.save(os.path.join(out_dir, stem + ".png"), "PNG", compress_level=6)


def main(argv):
    workloads = {"p1": p1, "t": t, "w": w, "o": o, "a": a, "n": n}
    if len(argv) < 4 or argv[1] not in workloads:
        print("usage: pillow_pipeline.py p1|t|w|o|a|n OUT_DIR FILE...", file=sys.stderr)
        return 2
    work = workloads[argv[1]]
    out_dir = argv[2]
    os.makedirs(out_dir, exist_ok=True)
    total = 0.0
    for path in argv[3:]:
        start = time.perf_counter()
        work(path, out_dir)
        total += time.perf_counter() - start
    print(f"seconds={total:.6f} images={len(argv) - 3}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
