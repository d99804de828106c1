#!/usr/bin/env python3
"""Untimed helpers for bench/pipeline.sh.

  prep.py ppm OUT_DIR FILE...   For each input, write STEM.full.ppm (the
                                2048x2048 fill + centre crop) and
                                STEM.thumb.ppm (256x256 of that), so the
                                libjpeg floor times exactly decode + encodes.
  prep.py png OUT_DIR FILE...   For each input, write STEM.png: its upright
                                RGB pixels as a PNG (zlib level 6, Pillow's
                                default), the sources of workload N.
  prep.py gif OUT_DIR FILE...   For each input, write STEM.gif: its upright
                                pixels cut to a 256-colour adaptive palette
                                (Pillow's default dithering), the sources of
                                workload G.
  prep.py heic OUT_DIR FILE...  For each input, write STEM.heic: its upright
                                RGB pixels as HEIC (x265 through
                                pillow-heif, quality 90), the sources of
                                workload H.
  prep.py tif OUT_DIR FILE...   For each input, write STEM.tif: its upright
                                RGB pixels as an LZW-compressed TIFF in
                                strips (Pillow's layout), the sources of
                                workload F.
  prep.py rgba OUT_DIR FILE...  For each input, write STEM.png: its
                                upright pixels with an alpha channel (an
                                ellipse inside the frame, its edge a soft
                                ramp, clear outside), the sources of
                                workload A.
  prep.py largest FILE...       Print "PATH WIDTH HEIGHT" of the input with
                                the most pixels.
"""
import os
import sys

from PIL import Image, ImageOps


def ppm(out_dir, files):
    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        im = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        full = ImageOps.fit(im, (2048, 2048), Image.Resampling.LANCZOS)
        full.save(os.path.join(out_dir, stem + ".full.ppm"))
        thumb = ImageOps.fit(full, (256, 256), Image.Resampling.LANCZOS)
        thumb.save(os.path.join(out_dir, stem + ".thumb.ppm"))


def png(out_dir, files):
    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        ImageOps.exif_transpose(Image.open(path)).convert("RGB").save(os.path.join(out_dir, stem + ".png"))


def gif(out_dir, files):
    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        rgb = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=256).save(os.path.join(out_dir, stem + ".gif"))


def heic(out_dir, files):
    import pillow_heif  # only this workload needs it

    pillow_heif.register_heif_opener()
    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        rgb = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        rgb.save(os.path.join(out_dir, stem + ".heic"), quality=90)


def tif(out_dir, files):
    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        rgb = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        rgb.save(os.path.join(out_dir, stem + ".tif"), compression="tiff_lzw")


def rgba(out_dir, files):
    from PIL import ImageDraw, ImageFilter

    os.makedirs(out_dir, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        rgb = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        w, h = rgb.size
        alpha = Image.new("L", rgb.size, 0)
        ImageDraw.Draw(alpha).ellipse((w * 0.08, h * 0.08, w * 0.92, h * 0.92), fill=255)
        rgb.putalpha(alpha.filter(ImageFilter.GaussianBlur(max(2, min(w, h) // 100))))
        rgb.save(os.path.join(out_dir, stem + ".png"))


def largest(files):
    best = None
    for path in files:
        with Image.open(path) as im:
            w, h = im.size  # orientation does not change the pixel count
        if best is None or w * h > best[1] * best[2]:
            best = (path, w, h)
    if best:
        print(f"{best[0]} {best[1]} {best[2]}")


def main(argv):
    if len(argv) >= 4 and argv[1] == "ppm":
        ppm(argv[2], argv[3:])
        return 0
    if len(argv) >= 4 and argv[1] == "png":
        png(argv[2], argv[3:])
        return 0
    if len(argv) >= 4 and argv[1] == "gif":
        gif(argv[2], argv[3:])
        return 0
    if len(argv) >= 4 and argv[1] == "heic":
        heic(argv[2], argv[3:])
        return 0
    if len(argv) >= 4 and argv[1] == "tif":
        tif(argv[2], argv[3:])
        return 0
    if len(argv) >= 4 and argv[1] == "rgba":
        rgba(argv[2], argv[3:])
        return 0
    if len(argv) >= 3 and argv[1] == "largest":
        largest(argv[2:])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
