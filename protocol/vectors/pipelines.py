#!/usr/bin/env python3
"""Writes pipelines.json: pipeline test vectors, built from protocol/pipeline.md alone.

This is a second, independent implementation of the pipeline language: it
parses each text, prints its canonical form and plans the output sizes by
the rules of pipeline.md. The Swift tests (Tests/DarkroomPipelineTests)
check every vector against the real parser and planner, so the two
implementations check each other. Error reasons are the reference parser's
wording, written here by hand: pipeline.md makes them informative; the
column of each error and whether a text is valid are normative, and this
script checks them with its own parser.

Run from anywhere:  python3 protocol/vectors/pipelines.py
"""
import json
import os

# pipeline.md, "Limits": the worker's default limits on every planned size.
MAX_PIXELS = 50_000_000
MAX_SIDE = 16_384
MAX_CANONICAL_BYTES = 4096

# pipeline.md, "Lexical rules": characters with the Unicode White_Space property.
WHITESPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}

OPERATIONS = ["scale", "crop", "glitch", "grayscale", "sepia", "invert", "blur", "sharpen", "brightness",
              "contrast", "saturation", "pixelate", "rotate", "flip", "pad", "srgb"]
HEX = set("0123456789abcdefABCDEF")
MODES = ["fit", "fill", "force"]
KERNELS = ["lanczos3", "bilinear", "nearest"]
PLACES = ["center", "north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest"]
GRAVITIES = PLACES + ["smart"]  # crop's; pad takes PLACES


class Invalid(Exception):
    """A syntax error at a 0-based column (code point index)."""

    def __init__(self, column):
        super().__init__(column)
        self.column = column


class StepFailure(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def lower(s):
    """ASCII case folding only (pipeline.md, "Lexical rules")."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def trimmed(text, start, end):
    """The token text[start:end] without surrounding whitespace, with its column."""
    lo, hi = start, end
    while lo < hi and text[lo] in WHITESPACE:
        lo += 1
    while hi > lo and text[hi - 1] in WHITESPACE:
        hi -= 1
    return text[lo:hi], lo


def split(text, start, end, separator):
    pieces, begin = [], start
    for i in range(start, end):
        if text[i] == separator:
            pieces.append(trimmed(text, begin, i))
            begin = i + 1
    pieces.append(trimmed(text, begin, end))
    return pieces


def is_integer(s):
    body = s[1:] if s[:1] in ("+", "-") else s
    return body != "" and all("0" <= c <= "9" for c in body)


def is_decimal(s):
    i = 1 if s[:1] in ("+", "-") else 0
    digits = 0
    while i < len(s) and "0" <= s[i] <= "9":
        i, digits = i + 1, digits + 1
    if i < len(s) and s[i] == ".":
        i += 1
        while i < len(s) and "0" <= s[i] <= "9":
            i, digits = i + 1, digits + 1
    if digits == 0:
        return False
    if i < len(s) and s[i] in "eE":
        i += 1
        if i < len(s) and s[i] in "+-":
            i += 1
        start = i
        while i < len(s) and "0" <= s[i] <= "9":
            i += 1
        if i == start:
            return False
    return i == len(s)


def number(value):
    """pipeline.md, "Canonical form": whole values as integers, others as the
    shortest text that reads back to the same binary64 value."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def parse_size(token, column, one_side_auto=False):
    parts = lower(token).split("x")
    if len(parts) != 2 or not all(is_integer(p) for p in parts):
        raise Invalid(column)
    w, h = int(parts[0]), int(parts[1])
    side = range(1, 65501)
    if not (w in side and h in side or one_side_auto and (w == 0 and h in side or h == 0 and w in side)):
        raise Invalid(column)
    return w, h


def parse_number(token, column, low, high):
    if not is_decimal(token):
        raise Invalid(column)
    value = float(token)
    if value != value or value in (float("inf"), float("-inf")) or not low <= value <= high:
        raise Invalid(column)
    return value


class Args:
    def __init__(self, name, name_col, positional, named):
        self.name, self.name_col = name, name_col
        self.positional, self.named = positional, named      # (text, col) and [(key, kcol, value, vcol)]
        self.used_positional, self.used = False, set()

    def require_positional(self):
        if self.positional is None:
            raise Invalid(self.name_col)
        self.used_positional = True
        return self.positional

    def value(self, key):
        self.used.add(key)
        for k, _, v, vcol in self.named:
            if lower(k) == key:
                return v, vcol
        return None

    def choice(self, key, options, default):
        found = self.value(key)
        if found is None:
            return default
        if lower(found[0]) not in options:
            raise Invalid(found[1])
        return lower(found[0])

    def number(self, key, default, low, high):
        found = self.value(key)
        return default if found is None else parse_number(found[0], found[1], low, high)

    def primary(self, key, default, low, high):
        named = self.value(key)
        if self.positional is not None:
            self.used_positional = True
            if named is not None:
                raise Invalid(self.positional[1])
            return parse_number(self.positional[0], self.positional[1], low, high), self.positional[1]
        if named is not None:
            return parse_number(named[0], named[1], low, high), self.name_col
        if default is None:
            raise Invalid(self.name_col)
        return default, self.name_col

    def finish(self):
        if self.positional is not None and not self.used_positional:
            raise Invalid(self.positional[1])
        for k, kcol, _, _ in self.named:
            if lower(k) not in self.used:
                raise Invalid(kcol)


def parse_arguments(text, start, end):
    positional, named = None, []
    for piece, col in split(text, start, end, ","):
        if piece == "":
            raise Invalid(min(col, len(text)))
        if "=" in piece:
            eq = piece.index("=")
            key, kcol = trimmed(text, col, col + eq)
            value, vcol = trimmed(text, col + eq + 1, col + len(piece))
            if key == "" or value == "":
                raise Invalid(col)
            if any(lower(k) == lower(key) for k, _, _, _ in named):
                raise Invalid(kcol)
            named.append((key, kcol, value, vcol))
        else:
            if positional is not None:
                raise Invalid(col)
            positional = (piece, col)
    return positional, named


def parse_step(text, piece, col):
    """One step -> (canonical text, output size function)."""
    if piece == "":
        raise Invalid(min(col, len(text)))
    positional, named = None, []
    if ":" in piece:
        colon = piece.index(":")
        name, name_col = trimmed(text, col, col + colon)
        positional, named = parse_arguments(text, col + colon + 1, col + len(piece))
    else:
        name, name_col = piece, col
    kind = lower(name)
    if kind not in OPERATIONS:
        raise Invalid(name_col)
    a = Args(kind, name_col, positional, named)
    if kind == "scale":
        token, tcol = a.require_positional()
        box = parse_size(token, tcol, one_side_auto=True)
        mode = a.choice("mode", MODES, "fit")
        kernel = a.choice("kernel", KERNELS, "lanczos3")
        enlarge = a.choice("enlarge", ["yes", "no"], "yes")
        # Written only when "no" (pipeline.md section 5).
        text = f"scale:{box[0]}x{box[1]},mode={mode},kernel={kernel}" + (",enlarge=no" if enlarge == "no" else "")
        step = (text, ("scale", box, mode, enlarge == "yes"))
    elif kind == "crop":
        token, tcol = a.require_positional()
        if lower(token) == "square":
            gravity = a.choice("gravity", GRAVITIES, "center")
            step = (f"crop:square,gravity={gravity}", ("square",))
        elif "+" in token:
            parts = lower(token).split("+")
            if len(parts) != 3 or not is_integer(parts[1]) or not is_integer(parts[2]) \
                    or int(parts[1]) < 0 or int(parts[2]) < 0:
                raise Invalid(tcol)
            w, h = parse_size(parts[0], tcol)
            x, y = int(parts[1]), int(parts[2])
            step = (f"crop:{w}x{h}+{x}+{y}", ("rect", (w, h, x, y)))
        else:
            size = parse_size(token, tcol)
            gravity = a.choice("gravity", GRAVITIES, "center")
            step = (f"crop:{size[0]}x{size[1]},gravity={gravity}", ("crop", size))
    elif kind == "glitch":
        found = a.value("seed")
        seed = 0
        if found is not None:
            if not is_integer(found[0]) or found[0].startswith("-") and int(found[0]) != 0 \
                    or not 0 <= int(found[0]) <= 2**64 - 1:
                raise Invalid(found[1])
            seed = int(found[0])
        amount = a.number("amount", 0.5, 0, 1)
        step = (f"glitch:seed={seed},amount={number(amount)}", ("same",))
    elif kind in ("grayscale", "sepia", "invert", "srgb"):
        step = (kind, ("same",))
    elif kind == "blur":
        sigma, _ = a.primary("sigma", None, 0.01, 100)
        step = (f"blur:{number(sigma)}", ("same",))
    elif kind == "sharpen":
        sigma, _ = a.primary("sigma", 1, 0.01, 100)
        amount = a.number("amount", 1, 0, 10)
        step = (f"sharpen:{number(sigma)},amount={number(amount)}", ("same",))
    elif kind in ("brightness", "contrast", "saturation"):
        factor, _ = a.primary("factor", None, 0, 10)
        step = (f"{kind}:{number(factor)}", ("same",))
    elif kind == "pixelate":
        n, where = a.primary("size", None, 1, 4096)
        if n != int(n):
            raise Invalid(where)
        step = (f"pixelate:{int(n)}", ("same",))
    elif kind == "rotate":
        token, tcol = a.require_positional()
        if not is_integer(token) or int(token) not in (90, 180, 270):
            raise Invalid(tcol)
        degrees = int(token)
        step = (f"rotate:{degrees}", ("swap",) if degrees != 180 else ("same",))
    elif kind == "pad":
        token, tcol = a.require_positional()
        size = parse_size(token, tcol)
        found = a.value("background")
        background = "000000"
        if found is not None:
            if lower(found[0]) == "transparent":
                background = "transparent"
            elif len(found[0]) not in (6, 8) or not set(found[0]) <= HEX:
                raise Invalid(found[1])
            elif len(found[0]) == 8 and lower(found[0][6:]) == "00":
                background = "transparent"  # alpha 0: a clear margin
            elif len(found[0]) == 8 and lower(found[0][6:]) == "ff":
                background = lower(found[0][:6])  # opaque: written without its alpha
            else:
                background = lower(found[0])
        gravity = a.choice("gravity", PLACES, "center")
        step = (f"pad:{size[0]}x{size[1]},background={background},gravity={gravity}", ("pad", size))
    else:  # flip
        token, tcol = a.require_positional()
        value = lower(token)
        if value in ("h", "horizontal"):
            step = ("flip:h", ("same",))
        elif value in ("v", "vertical"):
            step = ("flip:v", ("same",))
        else:
            raise Invalid(tcol)
    a.finish()
    return step


def parse(text):
    """-> list of (canonical step, size rule); raises Invalid."""
    pieces = split(text, 0, len(text), "|")
    if len(pieces) == 1 and pieces[0][0] == "":
        raise Invalid(0)
    steps = [parse_step(text, piece, col) for piece, col in pieces]
    if len(" | ".join(s[0] for s in steps).encode("utf-8")) > MAX_CANONICAL_BYTES:
        raise Invalid(0)
    return steps


def rounded(a, b, c):
    """round(a*b/c), halves up, at least 1, in exact integer arithmetic."""
    return max(1, (2 * a * b + c) // (2 * c))


def scaled(source, box, mode):
    (sw, sh), (bw, bh) = source, box
    # A side given as 0 follows the aspect ratio, whatever the mode.
    if bw == 0:
        return rounded(sw, bh, sh), bh
    if bh == 0:
        return bw, rounded(sh, bw, sw)
    wider = sw * bh >= sh * bw
    if mode == "force":
        return bw, bh
    if mode == "fit":
        return (bw, rounded(sh, bw, sw)) if wider else (rounded(sw, bh, sh), bh)
    return (rounded(sw, bh, sh), bh) if wider else (bw, rounded(sh, bw, sw))


def output(rule, size):
    w, h = size
    if rule[0] == "scale":
        out = scaled(size, rule[1], rule[2])
        # enlarge=no: a size larger on either side leaves the image as it is.
        if not rule[3] and (out[0] > w or out[1] > h):
            return size
        return out
    if rule[0] == "square":
        return min(w, h), min(w, h)
    if rule[0] == "crop":
        cw, ch = rule[1]
        if cw > w or ch > h:
            raise StepFailure("image.invalid-argument")
        return cw, ch
    if rule[0] == "rect":
        rw, rh, x, y = rule[1]
        if x + rw > w or y + rh > h:
            raise StepFailure("image.invalid-argument")
        return rw, rh
    if rule[0] == "swap":
        return h, w
    if rule[0] == "pad":
        pw, ph = rule[1]
        if w > pw or h > ph:
            raise StepFailure("image.invalid-argument")
        return pw, ph
    return w, h


def plan(steps, size):
    """-> the size after each step; raises (step index, StepFailure)."""
    sizes = []
    for index, (_, rule) in enumerate(steps, start=1):
        try:
            size = output(rule, size)
        except StepFailure as failure:
            raise PlanFailure(index, failure.code) from None
        if size[0] > MAX_SIDE or size[1] > MAX_SIDE or size[0] * size[1] > MAX_PIXELS:
            raise PlanFailure(index, "image.limit-exceeded")
        sizes.append(size)
    return sizes


class PlanFailure(Exception):
    def __init__(self, index, code):
        super().__init__(index, code)
        self.index, self.code = index, code


def thumbnail_region(full, thumb):
    """pipeline.md, "The thumbnail": the centred region of the full-resolution
    output that is resampled to the thumbnail size."""
    (sw, sh), (tw, th) = full, thumb
    if sw * th >= sh * tw:
        w, h = min(sw, max(1, (2 * sh * tw + th) // (2 * th))), sh
    else:
        w, h = sw, min(sh, max(1, (2 * sw * th + tw) // (2 * tw)))
    return w, h, (sw - w) // 2, (sh - h) // 2


def size_text(s): return f"{s[0]}x{s[1]}"
def parse_wxh(t): return tuple(int(v) for v in t.split("x"))


valid, failing, invalid = [], [], []


def ok(name, text, input_size, thumb="256x256", description=None):
    steps = parse(text)
    canonical = " | ".join(s[0] for s in steps)
    again = parse(canonical)
    assert " | ".join(s[0] for s in again) == canonical, name
    sizes = plan(steps, parse_wxh(input_size))
    region = thumbnail_region(sizes[-1], parse_wxh(thumb))
    valid.append({"name": name, "description": description or "", "text": text, "canonical": canonical,
                  "input": input_size, "sizes": [size_text(s) for s in sizes], "output": size_text(sizes[-1]),
                  "thumbnail": thumb, "thumbnailRegion": f"{region[0]}x{region[1]}+{region[2]}+{region[3]}"})


def fails(name, text, input_size, step_index, code, reason):
    steps = parse(text)
    try:
        plan(steps, parse_wxh(input_size))
    except PlanFailure as failure:
        assert (failure.index, failure.code) == (step_index, code), (name, failure.index, failure.code)
    else:
        raise AssertionError(f"{name}: planned without failing")
    failing.append({"name": name, "text": text, "input": input_size, "stepIndex": step_index,
                    "step": steps[step_index - 1][0], "code": code, "reason": reason})


def bad(name, text, column, reason):
    """`column` counts from 1, as the reference parser reports it."""
    try:
        parse(text)
    except Invalid as error:
        assert error.column + 1 == column, (name, error.column + 1, column)
    else:
        raise AssertionError(f"{name}: parsed, but must be invalid")
    invalid.append({"name": name, "text": text, "column": column, "reason": reason})


# ---------------------------------------------------------------- valid
ok("spec-example", "scale:2048x2048,mode=fill | crop:square | glitch:seed=7", "4000x2500",
   description="fill: 4000x2500 covers 2048x2048 at 3277x2048 (3276.8 rounded), the square keeps 2048x2048")
ok("fit-wide", "scale:1024x1024", "4000x3000", description="fit: the wider side is pinned to the box")
ok("fit-tall", "scale:1024x1024", "3000x4000")
ok("fit-half-up", "scale:5x5", "2x1", description="fit: 1 x 5 / 2 = 2.5 rounds half up to 3")
ok("fill-half-up", "scale:5x5,mode=fill", "3x2", description="fill: 3 x 5 / 2 = 7.5 rounds half up to 8")
ok("fit-same-aspect", "scale:200x100", "1000x500")
ok("fit-at-least-1", "scale:100x100", "10000x10", description="fit: 10 x 100 / 10000 = 0.1 is at least 1")
ok("fill-upscale", "scale:300x300,mode=fill", "40x30", description="scale also enlarges: 400x300")
ok("force", "scale:100x50,mode=force", "4000x3000")
ok("width-only", "scale:800x0", "4000x3000", description="0 for the height: it follows the aspect ratio, 600")
ok("height-only-fill", "scale:0x600,mode=fill", "3000x4000", description="0 for the width: 450, in any mode")
ok("width-only-force-odd", "scale:333x0,mode=force", "1000x501", description="501 x 333 / 1000 = 166.833 rounds to 167")
ok("width-only-no-enlarge", "scale:8000x0,enlarge=no", "4000x3000", description="would enlarge: left as it is")
ok("no-enlarge-small", "scale:2048x2048,enlarge=no", "1024x768", description="enlarge=no: a smaller input is left as it is")
ok("no-enlarge-large", "scale:2048x2048,Enlarge=NO", "4000x3000", description="enlarge=no still shrinks: 2048x1536")
ok("no-enlarge-fill", "scale:300x300,mode=fill,enlarge=no", "40x30",
   description="fill would make 400x300 of 40x30: left as it is")
ok("no-enlarge-force-one-side", "scale:100x50,mode=force,enlarge=no", "80x80",
   description="force would widen 80 to 100: left as it is, though the height would shrink")
ok("no-enlarge-then-crop", "scale:1000x1000,mode=fill,enlarge=no | crop:square", "640x480",
   description="the crop acts on the image the scale left: 480x480")
ok("enlarge-yes-default", "scale:300x300,enlarge=yes", "40x30",
   description="enlarge=yes is the default, and not written in the canonical text")
ok("kernel-and-order", "scale:640x480,kernel=Nearest,mode=force", "1000x1000",
   description="named arguments in any order and any ASCII case; the canonical order is fixed")
ok("crop-gravity", "crop:300x200,gravity=southeast", "1000x800")
ok("crop-rect", "crop:600x400+10+20", "1000x800")
ok("crop-rect-edge", "crop:600x400+400+400", "1000x800", description="a rectangle may touch the far edges")
ok("crop-square-gravity", "crop:SQUARE,gravity=NorthEast", "640x480")
ok("crop-smart", "scale:1024x1024,mode=fill | crop:square,gravity=Smart", "4000x3000",
   description="smart places the window by the pixels; its size is planned as any crop's")
ok("crop-size-smart", "crop:300x200,gravity=smart", "1000x800")
ok("rotate", "rotate:90 | rotate:180 | rotate:+270", "400x300", description="90 and 270 swap the sides")
ok("case-and-space", "  SCALE : 100X50 , MODE = Fill | Crop:Square,Gravity=North ", "1000x1000",
   description="whitespace around separators is ignored; names and keywords are ASCII case-insensitive")
ok("unicode-space", "scale:100x100,\u00a0mode=fill", "300x200",
   description="a no-break space (White_Space) around an argument is ignored too")
ok("numbers", "blur:2.50 | sharpen | brightness:1.0 | contrast:+1.25 | saturation:0.5e0", "64x64",
   description="numbers print as the shortest decimal that reads back; defaults are written out")
ok("number-exponent", "glitch:amount=0.00001,seed=3", "64x64",
   description="a value under 1e-4 prints with an exponent, as 1e-05")
ok("named-primary", "blur:sigma=3 | pixelate:size=8.0 | sharpen:sigma=0.5,amount=2", "64x64")
ok("no-arguments", "grayscale|sepia|invert", "64x48")
ok("srgb", "Scale:800x0 | SRGB", "4000x3000",
   description="srgb takes no arguments: the pixels go from the source's ICC profile to sRGB")
ok("flip", "flip:Horizontal | flip:V", "64x48")
ok("pad-letterbox", "scale:256x256 | pad:256x256,background=FFFFFF", "4000x3000",
   description="fit then pad: every photo exactly 256x256, whole, on white")
ok("pad-defaults", "pad:100x80", "64x48", description="black, centred; written out in the canonical text")
ok("pad-transparent", "scale:256x256 | pad:256x256,background=Transparent", "4000x3000",
   description="fit then pad on a clear canvas: transparent in PNG, WebP and AVIF outputs, white in JPEG")
ok("pad-translucent", "scale:256x256 | pad:256x256,background=FF000080", "4000x3000",
   description="a red margin at half alpha: translucent in PNG, WebP and AVIF outputs, laid over white in JPEG")
ok("pad-background-opaque-alpha", "pad:64x64,background=0A0B0CFF", "32x32",
   description="an alpha of ff is an opaque colour, written without it")
ok("pad-background-clear-alpha", "pad:64x64,background=ffffff00", "32x32",
   description="an alpha of 00 is a clear margin, whatever the colour: written transparent")
ok("pad-gravity-exact", "pad:64x48,gravity=SouthWest,background=0a0B0c", "64x48",
   description="a canvas the size of the input leaves it as it is")
ok("glitch-defaults", "glitch", "64x48")
ok("thumbnail-wide", "scale:1024x1024", "4000x3000", thumb="100x300",
   description="a thumbnail taller than the output: the centred 256x768 region is resampled to 100x300")
ok("thumbnail-floor", "crop:333x100", "1000x1000",
   description="the region is centred with the leftover halved down: (333 - 100) / 2 = 116")
ok("thumbnail-upscale", "scale:50x50", "200x100", thumb="256x256",
   description="a thumbnail larger than the output is enlarged to exactly its size")
ok("canonical-at-limit", "|".join(["invert"] * 455), "16x16",
   description="455 steps: the canonical text is 4092 bytes, within the 4096-byte limit")

# ---------------------------------------------------------------- planning failures
fails("crop-rect-outside", "scale:160x100 | crop:600x600+0+0", "320x200", 2, "image.invalid-argument",
      "rectangle 600x600+0+0 exceeds image 160x100")
fails("pad-smaller", "scale:300x300,mode=fill | pad:300x300", "400x300", 2, "image.invalid-argument",
      "image 400x300 is larger than pad 300x300")
fails("crop-larger", "crop:2000x100", "1000x800", 1, "image.invalid-argument",
      "crop 2000x100 is larger than image 1000x800")
fails("crop-after-rotate", "rotate:90 | crop:500x400", "800x450", 2, "image.invalid-argument",
      "crop 500x400 is larger than image 450x800")
fails("side-limit", "scale:20000x20000,mode=force", "100x100", 1, "image.limit-exceeded",
      "output 20000x20000 is over the limits (50 megapixels, 16384 pixels a side)")
fails("fill-side-limit", "grayscale | scale:10000x10000,mode=fill", "10000x10", 2, "image.limit-exceeded",
      "output 10000000x10000 is over the limits (50 megapixels, 16384 pixels a side)")
fails("pixel-limit", "scale:8000x8000,mode=force", "100x100", 1, "image.limit-exceeded",
      "output 8000x8000 is over the limits (50 megapixels, 16384 pixels a side)")

# ---------------------------------------------------------------- invalid
bad("empty", "", 1, "the pipeline is empty; expected a step such as scale:1024x1024")
bad("blank", "   ", 1, "the pipeline is empty; expected a step such as scale:1024x1024")
bad("empty-step", "grayscale | | invert", 13, "empty step; expected an operation between the bars")
bad("trailing-bar", "grayscale |", 12, "empty step; expected an operation between the bars")
bad("unknown-suggested", "scale:100x100 | crpo:square", 17, "unknown operation \"crpo\" (did you mean \"crop\"?)")
bad("unknown-listed", "resize:100x100", 1,
    "unknown operation \"resize\"; expected one of scale, crop, glitch, grayscale, sepia, invert, blur, sharpen, "
    "brightness, contrast, saturation, pixelate, rotate, flip, pad, srgb")
bad("arguments-before-name", "blurr:,x", 7, "empty argument to blurr; expected a value or key=value")
bad("scale-no-size", "scale", 1, "scale needs a size WxH, e.g. scale:1024x1024")
bad("scale-not-size", "scale:100", 7, "scale size must be WxH, e.g. 1024x768, not \"100\"")
bad("scale-zero", "scale:0x0", 7, "scale size 0x0 is out of range; each side must be 1 to 65500, or 0 for one side to follow the aspect ratio")
bad("scale-too-big", "scale:65501x10", 7, "scale size 65501x10 is out of range; each side must be 1 to 65500, or 0 for one side to follow the aspect ratio")
bad("scale-auto-too-big", "scale:0x65501", 7, "scale size 0x65501 is out of range; each side must be 1 to 65500, or 0 for one side to follow the aspect ratio")
bad("crop-zero", "crop:0x100", 6, "crop size 0x100 is out of range; each side must be 1 to 65500")
bad("scale-mode", "scale:100x100,mode=stretch", 20, "mode must be one of fit, fill, force, not \"stretch\"")
bad("pad-background", "pad:10x10,background=fff", 22, "background must be hex digits RRGGBB or RRGGBBAA, e.g. ffffff or ffffff80, or transparent, not \"fff\"")
bad("pad-background-sign", "pad:10x10,background=+fffff", 22,
    "background must be hex digits RRGGBB or RRGGBBAA, e.g. ffffff or ffffff80, or transparent, not \"+fffff\"")
bad("pad-background-clear", "pad:10x10,background=clear", 22,
    "background must be hex digits RRGGBB or RRGGBBAA, e.g. ffffff or ffffff80, or transparent, not \"clear\"")
bad("pad-background-seven", "pad:10x10,background=fffffff", 22,
    "background must be hex digits RRGGBB or RRGGBBAA, e.g. ffffff or ffffff80, or transparent, not \"fffffff\"")
bad("pad-no-size", "pad", 1, "pad needs a size WxH, e.g. pad:1024x1024")
bad("scale-enlarge", "scale:100x100,enlarge=false", 23, "enlarge must be one of yes, no, not \"false\"")
bad("key-twice", "scale:100x100,Mode=fill,mode=fit", 25, "mode is given twice")
bad("key-kelvin", "scale:100x100,\u212aernel=nearest", 15,
    "scale has no parameter \"\u212aernel\"; usage: scale:WxH[,mode=fit|fill|force][,kernel=lanczos3|bilinear|nearest][,enlarge=yes|no]")
bad("key-missing", "scale:100x100,=fill", 15, "missing parameter name before \"=\"")
bad("value-missing", "scale:100x100,mode=", 15, "missing value for mode")
bad("two-unnamed", "scale:100x100,200x200", 15, "scale takes one unnamed argument; name the others as key=value")
bad("blur-no-sigma", "blur", 1, "blur needs a sigma, e.g. blur:2")
bad("blur-hex", "blur:0x1p1", 6, "blur sigma must be a number, not \"0x1p1\"")
bad("blur-inf", "blur:inf", 6, "blur sigma must be a number, not \"inf\"")
bad("blur-twice", "blur:2,sigma=3", 6, "sigma is given twice")
bad("blur-range", "blur:200", 6, "blur sigma 200 is out of range 0.01...100")
bad("no-arguments", "grayscale:1", 11, "grayscale takes no unnamed argument; usage: grayscale (no arguments)")
bad("empty-argument", "grayscale:", 11, "empty argument to grayscale; expected a value or key=value")
bad("crop-rect-form", "crop:100x100+5", 6,
    "crop rectangle must be WxH+X+Y with X, Y >= 0, e.g. 600x400+10+20, not \"100x100+5\"")
bad("crop-rect-gravity", "crop:100x100+0+0,gravity=north", 18,
    "crop has no parameter \"gravity\"; usage: crop:square[,gravity=G] | crop:WxH[,gravity=G] | crop:WxH+X+Y")
bad("crop-gravity", "crop:square,gravity=up", 21,
    "gravity must be one of center, north, south, east, west, northeast, northwest, southeast, southwest, smart, not \"up\"")
bad("pad-smart", "pad:10x10,gravity=smart", 19,
    "pad's gravity must be one of center, north, south, east, west, northeast, northwest, southeast, southwest, not \"smart\"")
bad("crop-not-ascii", "crop:carré", 6, "crop size must be WxH, e.g. 1024x768, not \"carré\"")
bad("rotate-45", "rotate:45", 8, "rotate takes 90, 180 or 270 (degrees clockwise), not \"45\"")
bad("flip-x", "flip:x", 6, "flip takes h (left-right) or v (top-bottom), not \"x\"")
bad("pixelate-fraction", "pixelate:2.5", 10, "pixelate size must be a whole number of pixels")
bad("glitch-unnamed", "glitch:5", 8, "glitch takes no unnamed argument; usage: glitch[:seed=N][,amount=0..1]")
bad("glitch-seed", "glitch:seed=-1", 13, "seed must be a whole number from 0 to 18446744073709551615, not \"-1\"")
bad("canonical-too-long", "|".join(["invert"] * 456), 1,
    "the canonical form of this pipeline is 4101 bytes, over the limit of 4096; use fewer steps")

out = {
    "comment": "Generated by pipelines.py from pipeline.md. 'valid': each text, its canonical form, and for an "
               "input of the given upright size the size after every step, the output size and the region of the "
               "output that becomes the thumbnail (WxH+X+Y). 'failing': texts that parse but cannot run on the "
               "given input: the step (from 1) and error code of the job's failure. 'invalid': texts that do not "
               "parse: the 1-based column the error points at and the reference parser's reason. Sizes are "
               "checked against 'limits'.",
    "limits": {"maxPixels": MAX_PIXELS, "maxSide": MAX_SIDE, "maxCanonicalBytes": MAX_CANONICAL_BYTES},
    "valid": valid,
    "failing": failing,
    "invalid": invalid,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipelines.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(f"wrote {len(valid)} valid, {len(failing)} failing and {len(invalid)} invalid pipelines to {path}")
