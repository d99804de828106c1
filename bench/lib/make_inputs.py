#!/usr/bin/env python3
"""Input sets for bench/system.sh.

    make_inputs.py copies SRC.jpg N OUTDIR    N distinct files made from one JPEG
    make_inputs.py big OUT.jpg                one ~20 MB photo-like JPEG (Pillow, numpy)

`copies` writes N files that differ only by a COM (comment) segment right
after the SOI marker carrying the file's number: every file is a valid JPEG
with the same pixels, but no two have the same bytes, so nothing along the
way can treat them as one input. It takes a fraction of a second for 5,000.

`big` draws a 6000x4000 picture (24 MP, under the default 50 MP decode
limit): colour gradients plus Gaussian noise (sigma 30, a 1000x1000 tile
repeated), saved at quality 95 with 4:2:0 chroma, which comes to about
20 MB: noise is what keeps a JPEG of a camera photo large, and this one is
about as hard to decode per pixel as a noisy high-ISO shot.
"""
import os
import struct
import sys


def copies(src, count, out_dir):
    data = open(src, "rb").read()
    if data[:2] != b"\xff\xd8":
        sys.exit(f"make_inputs: {src} is not a JPEG")
    os.makedirs(out_dir, exist_ok=True)
    width = len(str(count))
    for i in range(count):
        text = f"darkroom bench input {i}".encode()
        comment = b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text
        name = os.path.join(out_dir, f"in-{i:0{width}d}.jpg")
        with open(name, "wb") as f:
            f.write(data[:2] + comment + data[2:])


def big(out):
    import io
    import numpy as np
    from PIL import Image

    width, height = 6000, 4000
    rng = np.random.default_rng(7)
    tile = rng.normal(0, 1, (1000, 1000, 3)).astype(np.float32)
    noise = np.tile(tile, (height // 1000, width // 1000, 1))
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    base = (x * np.array([0.6, -0.5, 0.5], dtype=np.float32)
            + y * np.array([0.4, 0.3, 0.5], dtype=np.float32)
            + np.array([0, 128, 0], dtype=np.float32))
    pixels = np.clip(base + noise * 30, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95, subsampling=2)
    with open(out, "wb") as f:
        f.write(buffer.getvalue())


def main(argv):
    if len(argv) == 4 and argv[0] == "copies":
        copies(argv[1], int(argv[2]), argv[3])
    elif len(argv) == 2 and argv[0] == "big":
        big(argv[1])
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main(sys.argv[1:])
