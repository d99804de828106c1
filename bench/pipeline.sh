#!/usr/bin/env bash
# Image-pipeline benchmark: Darkroom against the tools users would pick
# instead, on the same files, in the same run, one thread each.
#
#   bench/pipeline.sh [CORPUS_DIR] [--runs N]
#
# CORPUS_DIR defaults to <repo>/../shared/corpus/good. Every tool processes
# the whole directory N times (default 3), in rounds of one run of every
# tool, so that all of them meet the same drift in the machine's speed; the
# table reports each tool's BEST run (least disturbed by other work on the
# machine) and, for reference, the median. Environment:
#   DARKROOM_BIN   use this binary instead of `swift build -c release`
#   KEEP_OUT=1     keep the temporary output directory and print its path
#
# Workloads (see bench/README.md for each peer's exact commands):
#   P1  decode, fill-scale to 2048x2048, centre square crop, seeded glitch,
#       full output JPEG q95 4:4:4, plus a 256x256 aspect-fill thumbnail q70
#   T   thumbnail only: fill-scale to 256x256 + square crop, JPEG q70
#   W   web image: fill-scale to 1024x1024 + square crop, lossy WebP q80
#       (libwebp's defaults otherwise, as every peer uses it)
#   O   lossless: the same square as PNG, zlib level 6 with adaptive
#       filters (every peer's default, through libpng)
#   A   transparent PNG sources (the corpus with an alpha ellipse, untimed):
#       fill 1024x1024 + crop, written as RGBA PNG; every peer keeps the
#       alpha and resamples premultiplied colour
#   N   PNG sources (the corpus converted, untimed): fill-scale to 1024x1024
#       + square crop, JPEG q80; no tool can shrink a PNG on load
#   G   GIF sources (the corpus cut to 256 colours, untimed): the same
#       square as N, JPEG q80
#   H   HEIC sources (the corpus coded with x265 at quality 90 through
#       pillow-heif, untimed): the same square, JPEG q80; every peer decodes
#       through libheif and libde265
#   F   TIFF sources (the corpus written as LZW-compressed RGB TIFF in
#       strips by Pillow, untimed): the same square, JPEG q80; every peer
#       decodes through libtiff
#
# The markdown report is printed and written to bench/out/pipeline-latest.md.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PEERS="$HERE/peers"
CORPUS="$REPO/../shared/corpus/good"
RUNS=3

usage() { sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --runs) RUNS="${2:-}"; shift 2 || { usage; exit 2; } ;;
        --runs=*) RUNS="${1#--runs=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
        *) CORPUS="$1"; shift ;;
    esac
done
case "$RUNS" in ''|*[!0-9]*|0) echo "--runs needs a positive integer, got '$RUNS'" >&2; exit 2 ;; esac

log() { printf '%s\n' "$*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- installs
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
APT_UPDATED=0
apt_install() {
    have apt-get || { log "apt-get not found; please install: $*"; return 1; }
    if [ "$APT_UPDATED" -eq 0 ]; then as_root apt-get update -qq || return 1; APT_UPDATED=1; fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

missing=()
have python3 || missing+=(python3)
{ have vips && have vipsthumbnail; } || missing+=(libvips-tools)
{ [ -x /usr/bin/convert-im6.q16 ] || [ -x /usr/bin/magick ] || [ -x /usr/bin/convert ]; } || missing+=(imagemagick)
{ have djpeg && have cjpeg; } || missing+=(libjpeg-turbo-progs)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    apt_install "${missing[@]}" || log "install failed; peers that need these will be skipped"
fi
if have python3 && ! python3 -c 'import PIL' 2>/dev/null; then
    log "installing Pillow with pip"
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
    python3 -m pip install --user --quiet Pillow 2>/dev/null \
        || python3 -m pip install --user --quiet --break-system-packages Pillow \
        || log "Pillow install failed; the Pillow peer will be skipped"
fi
if have python3 && python3 -c 'import PIL' 2>/dev/null && ! python3 -c 'import pillow_heif' 2>/dev/null; then
    log "installing pillow-heif with pip (workload H)"
    python3 -m pip install --user --quiet pillow-heif 2>/dev/null \
        || python3 -m pip install --user --quiet --break-system-packages pillow-heif \
        || log "pillow-heif install failed; workload H will be skipped"
fi

# ImageMagick: the real binary by full path, never whatever `convert` is first on PATH.
IM=""
for c in /usr/bin/convert-im6.q16 /usr/bin/magick /usr/bin/convert; do
    if [ -x "$c" ]; then IM="$c"; break; fi
done
HAVE_PIL=0; have python3 && python3 -c 'import PIL' 2>/dev/null && HAVE_PIL=1

CORES=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')  # before OMP_NUM_THREADS, which nproc obeys
# One thread everywhere.
export VIPS_CONCURRENCY=1 MAGICK_THREAD_LIMIT=1 OMP_NUM_THREADS=1

# ---------------------------------------------------------------- inputs
[ -d "$CORPUS" ] || { log "corpus directory not found: $CORPUS"; exit 2; }
CORPUS=$(cd "$CORPUS" && pwd)
shopt -s nullglob nocaseglob
FILES=("$CORPUS"/*.jpg "$CORPUS"/*.jpeg)
shopt -u nullglob nocaseglob
NIMG=${#FILES[@]}
[ "$NIMG" -gt 0 ] || { log "no .jpg files in $CORPUS"; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/darkroom-bench.XXXXXX")
if [ "${KEEP_OUT:-0}" = 1 ]; then trap 'log "outputs kept in $WORK"' EXIT; else trap 'rm -rf "$WORK"' EXIT; fi

P1_OPS='scale:2048x2048,mode=fill | crop:square | glitch:seed=7'
T_OPS='scale:256x256,mode=fill | crop:square'
W_OPS='scale:1024x1024,mode=fill | crop:square'

# ---------------------------------------------------------------- darkroom
DR=""; DR_NOTE=""
if [ -n "${DARKROOM_BIN:-}" ]; then
    if [ -x "$DARKROOM_BIN" ]; then DR="$DARKROOM_BIN"; else DR_NOTE="DARKROOM_BIN=$DARKROOM_BIN is not executable"; fi
elif have swift; then
    log "building darkroom (swift build -c release --product darkroom --static-swift-stdlib)"
    if (cd "$REPO" && swift build -c release --product darkroom --static-swift-stdlib >"$WORK/build.log" 2>&1); then
        bin_dir=$(cd "$REPO" && swift build -c release --static-swift-stdlib --show-bin-path 2>/dev/null)
        if [ -x "$bin_dir/darkroom" ]; then DR="$bin_dir/darkroom"; else DR_NOTE="build produced no darkroom binary"; fi
    else
        DR_NOTE="swift build failed: $(tail -n 3 "$WORK/build.log" | tr '\n' ' ')"
    fi
else
    DR_NOTE="swift not found and DARKROOM_BIN not set"
fi
[ -n "$DR_NOTE" ] && log "darkroom: $DR_NOTE"

# Probe once, untimed, on the first file: settles which flags this build takes.
DR_JOBS=(--jobs 1)
DR_T_THUMB=(--thumb none)
if [ -n "$DR" ]; then
    probe="$WORK/probe"; mkdir -p "$probe"
    if ! "$DR" process "${FILES[0]}" --ops "$P1_OPS" --out "$probe" --thumb 256x256 \
            --quality 95 --thumb-quality 70 "${DR_JOBS[@]}" >/dev/null 2>"$WORK/probe.err"; then
        "$DR" process "${FILES[0]}" --ops "$P1_OPS" --out "$probe" --thumb 256x256 \
            --quality 95 --thumb-quality 70 >/dev/null 2>"$WORK/probe2.err"
        rc=$?
        if [ "$rc" -eq 0 ]; then
            DR_JOBS=(); log "darkroom: --jobs not accepted; running without it (one image at a time is the default)"
        else
            DR_NOTE="darkroom process failed (exit $rc) on $(basename "${FILES[0]}"): $(tail -n 3 "$WORK/probe2.err" | tr '\n' ' ')"
            log "$DR_NOTE"; DR=""
        fi
    fi
fi
if [ -n "$DR" ]; then
    if ! "$DR" process "${FILES[0]}" --ops "$T_OPS" --out "$WORK/probe" "${DR_T_THUMB[@]}" \
            --quality 70 "${DR_JOBS[@]}" >/dev/null 2>"$WORK/probe-t.err"; then
        DR_T_THUMB=(--thumb 8x8 --thumb-quality 70)
        log "darkroom: --thumb none not accepted; workload T writes an 8x8 thumbnail instead"
    fi
fi

# ---------------------------------------------------------------- timing
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# The files the square workloads (T, W, N, G) read: the corpus, or its PNGs or GIFs.
SRC=("${FILES[@]}")

# Each peer function runs one whole pass into the directory $1 and sets
# RUN_SECONDS; it returns non-zero if the tool failed.
RUN_SECONDS=""
declare -A BEST MEDIAN STATUS

declare -A TIMES
# measure_once KEY ROUND: one run of the peer function KEY, its time added
# to TIMES[KEY]. A peer that failed once is not run again.
measure_once() {
    local key="$1" round="$2" out
    [ "${STATUS[$key]:-}" = "" ] || [ "${STATUS[$key]}" = measuring ] || return 0
    out="$WORK/out-$key"; rm -rf "$out"; mkdir -p "$out"
    if ! "$key" "$out" 2>"$WORK/$key.err"; then
        STATUS[$key]="failed: $(tail -n 2 "$WORK/$key.err" | tr '\n' ' ')"
        log "$key: ${STATUS[$key]}"
        return 1
    fi
    TIMES[$key]+="$RUN_SECONDS "
    STATUS[$key]=measuring
    log "$key run $round/$RUNS: ${RUN_SECONDS}s"
}

# summarize KEY: best and median of the runs measured.
summarize() {
    local key="$1"
    [ "${STATUS[$key]:-}" = measuring ] || return 0
    BEST[$key]=$(printf '%s\n' ${TIMES[$key]} | sort -g | head -n 1)
    MEDIAN[$key]=$(printf '%s\n' ${TIMES[$key]} | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    STATUS[$key]=ok
}

stem() { local b; b=$(basename "$1"); printf '%s' "${b%.*}"; }

# --- P1 peers

p1_darkroom() {
    local t0; t0=$(now)
    "$DR" process "${FILES[@]}" --ops "$P1_OPS" --out "$1" --thumb 256x256 \
        --quality 95 --thumb-quality 70 "${DR_JOBS[@]}" >/dev/null || return 1
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}

# Pillow: one Python process for the batch; RUN_SECONDS is the in-process
# time spent on the images (interpreter start and imports excluded).
PILLOW_WALL=""
pillow_run() {
    local mode="$1" out="$2" t0 line
    t0=$(now)
    line=$(python3 "$PEERS/pillow_pipeline.py" "$mode" "$out" "${SRC[@]}" | tail -n 1) || return 1
    PILLOW_WALL=$(elapsed "$t0" "$(now)")
    RUN_SECONDS=$(printf '%s\n' "$line" | sed -n 's/^seconds=\([0-9.]*\) .*/\1/p')
    [ -n "$RUN_SECONDS" ]
}
p1_pillow() { pillow_run p1 "$1"; }

# vips CLI, as a shell user runs it: one command per step, .v (vips native,
# uncompressed) between steps. `vips thumbnail W --height H --crop centre`
# is the fill-scale + centre crop (it shrinks on load when the factor allows).
# The CLI has no single-command per-channel shift; chaining extract_band /
# wrap / bandjoin costs a process start (~0.1 s of libvips init) per step,
# which would measure start-up, not pixels. So the glitch stand-in is one
# `vips wrap` of the whole image by 1% of the width (one full pass over the
# pixels, like the channel shift), fused with the q95 4:4:4 save. Then
# vipsthumbnail makes the 256x256 fill thumbnail of the full output at q70.
p1_vips() {
    local out="$1" f s t0 step="$WORK/vips-step.v"
    t0=$(now)
    for f in "${FILES[@]}"; do
        s=$(stem "$f")
        vips thumbnail "$f" "$step" 2048 --height 2048 --crop centre || return 1
        vips wrap "$step" "$out/$s.jpg[Q=95,subsample-mode=off]" --x 20 --y 0 || return 1
        vipsthumbnail "$out/$s.jpg" -s 256x256 -m centre -o "$out/${s}_thumb.jpg[Q=70]" || return 1
    done
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
    rm -f "$step"
}

# ImageMagick: idiomatic cover + extent; the glitch is a real channel shift
# (R rolled right, B rolled left by 20 px, recombined). Thumbnail from the
# full output.
p1_magick() {
    local out="$1" f s t0
    t0=$(now)
    for f in "${FILES[@]}"; do
        s=$(stem "$f")
        "$IM" "$f" -auto-orient -colorspace sRGB -resize '2048x2048^' -gravity center -extent 2048x2048 \
            \( -clone 0 -channel R -separate +channel -roll +20+0 \) \
            \( -clone 0 -channel G -separate +channel \) \
            \( -clone 0 -channel B -separate +channel -roll -20+0 \) \
            -delete 0 -combine -quality 95 -sampling-factor 4:4:4 "$out/$s.jpg" || return 1
        "$IM" "$out/$s.jpg" -resize '256x256^' -gravity center -extent 256x256 -quality 70 \
            "$out/${s}_thumb.jpg" || return 1
    done
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}

# libjpeg floor: full decode of each input, plus encoding a prepared
# 2048x2048 image at q95 4:4:4 and a 256x256 image at q70. The PPMs are made
# before timing, so the floor is exactly one decode and two encodes.
FLOOR_PPM="$WORK/floor-ppm"
p1_floor() {
    local out="$1" f s t0
    t0=$(now)
    for f in "${FILES[@]}"; do
        s=$(stem "$f")
        djpeg -outfile /dev/null "$f" || return 1
        cjpeg -quality 95 -sample 1x1 -outfile "$out/$s.jpg" "$FLOOR_PPM/$s.full.ppm" || return 1
        cjpeg -quality 70 -outfile "$out/${s}_thumb.jpg" "$FLOOR_PPM/$s.thumb.ppm" || return 1
    done
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}

# --- T peers

# T and W share their peers, with the square's side, the quality and the
# output format (a file extension) as arguments.
# darkroom: one process for the batch, no thumbnail; extra flags follow.
square_darkroom() { # OUT OPS QUALITY [FLAGS...]
    local out="$1" ops="$2" quality="$3" t0; shift 3
    t0=$(now)
    "$DR" process "${SRC[@]}" --ops "$ops" --out "$out" "${DR_T_THUMB[@]}" \
        --quality "$quality" "$@" "${DR_JOBS[@]}" >/dev/null || return 1
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}
# vipsthumbnail batch: one process for every file (shrink-on-load + crop).
square_vips() { # OUT SIDE QUALITY EXT
    local t0; t0=$(now)
    vipsthumbnail "${SRC[@]}" -s "$2x$2" -m centre -o "$1/%s.$4[Q=$3]" || return 1
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}
# ImageMagick's thumbnail idiom: jpeg:size (twice the side) lets libjpeg
# scale the decode.
square_magick() { # OUT SIDE QUALITY EXT
    local out="$1" side="$2" f t0
    t0=$(now)
    for f in "${SRC[@]}"; do
        "$IM" -define jpeg:size=$((2 * side))x$((2 * side)) "$f" -auto-orient -thumbnail "${side}x${side}^" -gravity center \
            -extent "${side}x${side}" -quality "$3" "$out/$(stem "$f").$4" || return 1
    done
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}

t_darkroom() { square_darkroom "$1" "$T_OPS" 70; }
t_pillow() { pillow_run t "$1"; }
t_vips() { square_vips "$1" 256 70 jpg; }
t_magick() { square_magick "$1" 256 70 jpg; }
# Floor: DCT-scaled 1/8 decode plus one q70 encode of a 256x256 image.
t_floor() {
    local out="$1" f s t0
    t0=$(now)
    for f in "${FILES[@]}"; do
        s=$(stem "$f")
        djpeg -scale 1/8 -outfile /dev/null "$f" || return 1
        cjpeg -quality 70 -outfile "$out/$s.jpg" "$FLOOR_PPM/$s.thumb.ppm" || return 1
    done
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}

# --- W peers: the same 1024x1024 square as lossy WebP at quality 80.

w_darkroom() { square_darkroom "$1" "$W_OPS" 80 --format webp; }
w_pillow() { pillow_run w "$1"; }
w_vips() { square_vips "$1" 1024 80 webp; }
w_magick() { square_magick "$1" 1024 80 webp; }

# --- O peers: the same square as PNG. The quality argument means nothing
# to a PNG but ImageMagick's, whose 65 is zlib level 6 with adaptive
# filtering, as the others' defaults.
o_darkroom() { square_darkroom "$1" "$W_OPS" 80 --format png; }
o_pillow() { pillow_run o "$1"; }
o_vips() { square_vips "$1" 1024 80 png; }
o_magick() { square_magick "$1" 1024 65 png; }

# --- A peers: transparent PNG sources, the square as an RGBA PNG.
RGBA_FILES=()
a_darkroom() { on_sources RGBA_FILES square_darkroom "$1" "$W_OPS" 80 --format png; }
a_pillow() { on_sources RGBA_FILES pillow_run a "$1"; }
a_vips() { on_sources RGBA_FILES square_vips "$1" 1024 80 png; }
# -background none: -extent would otherwise lay the picture over white.
a_magick() {
    local out="$1" f t0
    t0=$(now)
    for f in "${RGBA_FILES[@]}"; do
        "$IM" "$f" -auto-orient -thumbnail "1024x1024^" -background none -gravity center -extent 1024x1024 -quality 65 \
            "$out/$(stem "$f").png" || return 1
    done
    RUN_SECONDS=$(elapsed "$t0" "$(now)")
}

# --- N peers: the W square from PNG sources, as JPEG q80. jpeg:size does
# nothing for a PNG, so ImageMagick's idiom is the same command.
# on_sources ARRAY COMMAND...: COMMAND with SRC set to ARRAY's files.
on_sources() {
    local -n list=$1
    local rc
    shift
    SRC=("${list[@]}"); "$@"; rc=$?; SRC=("${FILES[@]}"); return $rc
}
PNG_FILES=()
n_darkroom() { on_sources PNG_FILES square_darkroom "$1" "$W_OPS" 80; }
n_pillow() { on_sources PNG_FILES pillow_run n "$1"; }
n_vips() { on_sources PNG_FILES square_vips "$1" 1024 80 jpg; }
n_magick() { on_sources PNG_FILES square_magick "$1" 1024 80 jpg; }

# --- G peers: the N square from GIF sources (Pillow's script reads any
# source, so its N mode serves).
GIF_FILES=()
g_darkroom() { on_sources GIF_FILES square_darkroom "$1" "$W_OPS" 80; }
g_pillow() { on_sources GIF_FILES pillow_run n "$1"; }
g_vips() { on_sources GIF_FILES square_vips "$1" 1024 80 jpg; }
g_magick() { on_sources GIF_FILES square_magick "$1" 1024 80 jpg; }

# --- H peers: the same square from HEIC sources.
HEIC_FILES=()
h_darkroom() { on_sources HEIC_FILES square_darkroom "$1" "$W_OPS" 80; }
h_pillow() { on_sources HEIC_FILES pillow_run n "$1"; }
h_vips() { on_sources HEIC_FILES square_vips "$1" 1024 80 jpg; }
h_magick() { on_sources HEIC_FILES square_magick "$1" 1024 80 jpg; }

# --- F peers: the same square from TIFF sources.
TIFF_FILES=()
f_darkroom() { on_sources TIFF_FILES square_darkroom "$1" "$W_OPS" 80; }
f_pillow() { on_sources TIFF_FILES pillow_run n "$1"; }
f_vips() { on_sources TIFF_FILES square_vips "$1" 1024 80 jpg; }
f_magick() { on_sources TIFF_FILES square_magick "$1" 1024 80 jpg; }

# ---------------------------------------------------------------- run
skip() { STATUS[$1]="skipped: $2"; log "$1: ${STATUS[$1]}"; }

FLOOR_OK=0
if have djpeg && have cjpeg && [ "$HAVE_PIL" = 1 ]; then
    log "preparing floor inputs (untimed)"
    python3 "$PEERS/prep.py" ppm "$FLOOR_PPM" "${FILES[@]}" && FLOOR_OK=1
fi

[ -n "$DR" ] || { skip p1_darkroom "${DR_NOTE:-unavailable}"; skip t_darkroom "${DR_NOTE:-unavailable}"; }
[ "$HAVE_PIL" = 1 ] || { skip p1_pillow "Pillow not installed"; skip t_pillow "Pillow not installed"; }
{ have vips && have vipsthumbnail; } || skip p1_vips "vips not installed"
have vipsthumbnail || skip t_vips "vips not installed"
[ -n "$IM" ] || { skip p1_magick "ImageMagick not installed"; skip t_magick "ImageMagick not installed"; }
[ "$HAVE_PIL" = 1 ] && python3 -c 'from PIL import features; import sys; sys.exit(0 if features.check("webp") else 1)' 2>/dev/null \
    || skip w_pillow "Pillow without WebP"
have vipsthumbnail || skip w_vips "vips not installed"
if [ -z "$IM" ]; then skip w_magick "ImageMagick not installed"
elif ! "$IM" -list format 2>/dev/null | grep -qi '^ *WEBP'; then skip w_magick "ImageMagick without its WebP coder"; fi
[ -n "$DR" ] || skip w_darkroom "${DR_NOTE:-unavailable}"
[ -n "$DR" ] || skip o_darkroom "${DR_NOTE:-unavailable}"
[ "$HAVE_PIL" = 1 ] || skip o_pillow "Pillow not installed"
have vipsthumbnail || skip o_vips "vips not installed"
[ -n "$IM" ] || skip o_magick "ImageMagick not installed"
# converted_sources FORMAT WORKLOAD ARRAY: the corpus converted (untimed) by
# prep.py FORMAT into $WORK/FORMAT, its files' paths appended to ARRAY;
# WORKLOAD's peers are skipped when there are none, and each peer whose
# tool is missing.
converted_sources() {
    local format=$1 w=$2 f k ext=${4:-$1}
    local -n into=$3
    if [ "$HAVE_PIL" = 1 ]; then
        log "converting the corpus to $format for workload ${w^^} (untimed)"
        if python3 "$PEERS/prep.py" "$format" "$WORK/$format" "${FILES[@]}"; then
            for f in "${FILES[@]}"; do into+=("$WORK/$format/$(stem "$f").$ext"); done
        fi
    fi
    if [ ${#into[@]} -eq 0 ]; then
        for k in darkroom pillow vips magick; do skip "${w}_$k" "no $format inputs (Pillow missing)"; done
    fi
    [ -n "$DR" ] || skip "${w}_darkroom" "${DR_NOTE:-unavailable}"
    have vipsthumbnail || skip "${w}_vips" "vips not installed"
    [ -n "$IM" ] || skip "${w}_magick" "ImageMagick not installed"
}
converted_sources png n PNG_FILES
converted_sources rgba a RGBA_FILES png
converted_sources gif g GIF_FILES
converted_sources heic h HEIC_FILES
converted_sources tif f TIFF_FILES
[ "$FLOOR_OK" = 1 ] || { skip p1_floor "djpeg/cjpeg or Pillow missing"; skip t_floor "djpeg/cjpeg or Pillow missing"; }

PEER_KEYS=(p1_darkroom p1_pillow p1_vips p1_magick p1_floor t_darkroom t_pillow t_vips t_magick t_floor
           w_darkroom w_pillow w_vips w_magick o_darkroom o_pillow o_vips o_magick a_darkroom a_pillow a_vips a_magick n_darkroom n_pillow n_vips n_magick g_darkroom g_pillow g_vips g_magick
           h_darkroom h_pillow h_vips h_magick f_darkroom f_pillow f_vips f_magick)
log "P1, T, W, O, A, N, G, H and F on $NIMG images, $RUNS rounds of one run per tool"
for ((round = 1; round <= RUNS; round++)); do
    for key in "${PEER_KEYS[@]}"; do
        measure_once "$key" "$round"
        case "$key" in
            p1_pillow) P1_PILLOW_WALL=$PILLOW_WALL ;;
            t_pillow) T_PILLOW_WALL=$PILLOW_WALL ;;
            w_pillow) W_PILLOW_WALL=$PILLOW_WALL ;;
            o_pillow) O_PILLOW_WALL=$PILLOW_WALL ;;
            n_pillow) N_PILLOW_WALL=$PILLOW_WALL ;;
            g_pillow) G_PILLOW_WALL=$PILLOW_WALL ;;
            h_pillow) H_PILLOW_WALL=$PILLOW_WALL ;;
            f_pillow) F_PILLOW_WALL=$PILLOW_WALL ;;
        esac
    done
done
for key in "${PEER_KEYS[@]}"; do summarize "$key"; done

# Peak RSS of darkroom on the largest input alone, against 3x its decoded RGB size.
RSS_LINE=""
if [ -n "$DR" ] && [ -x /usr/bin/time ] && [ "$HAVE_PIL" = 1 ]; then
    read -r BIG BIG_W BIG_H < <(python3 "$PEERS/prep.py" largest "${FILES[@]}")
    mkdir -p "$WORK/rss"
    if /usr/bin/time -v -o "$WORK/rss.txt" "$DR" process "$BIG" --ops "$P1_OPS" --out "$WORK/rss" \
            --thumb 256x256 --quality 95 --thumb-quality 70 "${DR_JOBS[@]}" >/dev/null 2>"$WORK/rss.err"; then
        RSS_KB=$(sed -n 's/.*Maximum resident set size (kbytes): *\([0-9]*\).*/\1/p' "$WORK/rss.txt")
        RSS_LINE=$(awk -v kb="$RSS_KB" -v w="$BIG_W" -v h="$BIG_H" -v f="$(basename "$BIG")" 'BEGIN {
            rss = kb * 1024; rgb = w * h * 3; lim = 3 * rgb
            printf "%s peak RSS %.1f MiB on %s (%dx%d); limit 3 x decoded RGB = %.1f MiB (%.2fx RGB)",
                (rss <= lim ? "PASS" : "FAIL"), rss / 1048576, f, w, h, lim / 1048576, rss / rgb }')
    else
        RSS_LINE="SKIP peak RSS: darkroom failed on $(basename "$BIG")"
    fi
elif [ -z "$DR" ]; then
    RSS_LINE="SKIP peak RSS: darkroom unavailable"
else
    RSS_LINE="SKIP peak RSS: /usr/bin/time or Pillow missing"
fi

# ---------------------------------------------------------------- report
ok() { [ "${STATUS[$1]:-}" = ok ]; }
fmt_row() { # KEY LABEL
    local key="$1" label="$2"
    if ! ok "$key"; then printf '| %s | %s | | | | |\n' "$label" "${STATUS[$key]:-not run}"; return; fi
    awk -v b="${BEST[$key]}" -v m="${MEDIAN[$key]}" -v n="$NIMG" -v label="$label" \
        -v dr="${BEST[${key%%_*}_darkroom]:-}" -v isdr="$([ "${key#*_}" = darkroom ] && echo 1 || echo 0)" 'BEGIN {
        if (isdr == 1) ratio = "-"
        else if (dr == "") ratio = "n/a"
        else if (b >= dr) ratio = sprintf("darkroom is %.2fx faster", b / dr)
        else ratio = sprintf("darkroom takes %.2fx as long", dr / b)
        printf "| %s | %.3f | %.3f | %.3f | %.2f | %s |\n", label, b, m, b / n, n / b, ratio }'
}
# why_not KEY...: the status of each key that did not run cleanly.
why_not() {
    local k msg=""
    for k in "$@"; do ok "$k" || msg="${msg:+$msg; }$k ${STATUS[$k]:-not run}"; done
    printf '%s' "$msg"
}
# target LABEL NUM_KEY DEN_KEY MIN: PASS if best[NUM]/best[DEN] >= MIN
target_ratio() {
    local label="$1" slow="$2" fast="$3" min="$4"
    if ok "$slow" && ok "$fast"; then
        awk -v s="${BEST[$slow]}" -v f="${BEST[$fast]}" -v min="$min" -v label="$label" 'BEGIN {
            r = s / f; printf "%s %s: %.2fx (target >= %.1fx)\n", (r >= min ? "PASS" : "FAIL"), label, r, min }'
    else
        echo "SKIP $label: $(why_not "$slow" "$fast")"
    fi
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
ver_pil=$([ "$HAVE_PIL" = 1 ] && python3 -c 'import PIL; print(PIL.__version__)')
ver_vips=$(have vips && vips --version 2>/dev/null | head -n 1)
ver_im=$([ -n "$IM" ] && "$IM" -version 2>/dev/null | head -n 1 | sed 's/^Version: //; s/ https.*//')
ver_jpeg=$(have cjpeg && { cjpeg -version 2>&1 | head -n 1; })

REPORT="$WORK/report.md"
{
    echo "# Darkroom image-pipeline benchmark"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(hostname), ${CORES} cores, ${cpu:-unknown CPU}"
    echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
    echo "- corpus: $CORPUS ($NIMG images), best of $RUNS runs (median shown too), one thread per tool"
    if [ -n "$DR" ]; then echo "- darkroom: $DR process ... ${DR_JOBS[*]}"; else echo "- darkroom: unavailable (${DR_NOTE:-unknown})"; fi
    echo "- Pillow ${ver_pil:-missing} (in-process time; wall with interpreter start P1 ${P1_PILLOW_WALL:-?}s, T ${T_PILLOW_WALL:-?}s, W ${W_PILLOW_WALL:-?}s, O ${O_PILLOW_WALL:-?}s, N ${N_PILLOW_WALL:-?}s, G ${G_PILLOW_WALL:-?}s, H ${H_PILLOW_WALL:-?}s, F ${F_PILLOW_WALL:-?}s in the last run); ${ver_vips:-vips missing}; ${ver_im:-ImageMagick missing}; ${ver_jpeg:-libjpeg tools missing}"
    echo
    echo "## P1: fill 2048x2048, square crop, glitch, q95 4:4:4 + thumb 256x256 q70"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row p1_darkroom darkroom
    fmt_row p1_pillow "Pillow (ImageOps.fit LANCZOS)"
    fmt_row p1_vips "vips CLI (thumbnail, wrap+save, vipsthumbnail)"
    fmt_row p1_magick "ImageMagick convert"
    fmt_row p1_floor "libjpeg floor (djpeg + 2x cjpeg)"
    echo
    echo "## T: thumbnail only, fill 256x256, q70"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row t_darkroom "darkroom ${DR_T_THUMB[*]}"
    fmt_row t_pillow "Pillow draft + ImageOps.fit"
    fmt_row t_vips "vipsthumbnail batch"
    fmt_row t_magick "ImageMagick -define jpeg:size -thumbnail"
    fmt_row t_floor "libjpeg floor (djpeg -scale 1/8 + cjpeg)"
    echo
    echo "## W: web image, fill 1024x1024, lossy WebP q80"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row w_darkroom "darkroom --format webp"
    fmt_row w_pillow "Pillow draft + ImageOps.fit, WEBP"
    fmt_row w_vips "vipsthumbnail batch, .webp"
    fmt_row w_magick "ImageMagick -define jpeg:size -thumbnail, .webp"
    echo
    echo "## O: lossless, fill 1024x1024, PNG (zlib level 6)"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row o_darkroom "darkroom --format png"
    fmt_row o_pillow "Pillow draft + ImageOps.fit, PNG compress_level=6"
    fmt_row o_vips "vipsthumbnail batch, .png"
    fmt_row o_magick "ImageMagick -define jpeg:size -thumbnail, .png -quality 65"
    echo
    echo "## A: transparent PNG sources, fill 1024x1024, RGBA PNG (zlib level 6)"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row a_darkroom "darkroom --format png (alpha kept)"
    fmt_row a_pillow "Pillow ImageOps.fit RGBA, PNG compress_level=6"
    fmt_row a_vips "vipsthumbnail batch, .png"
    fmt_row a_magick "ImageMagick -thumbnail -background none, .png -quality 65"
    echo
    echo "## N: PNG sources, fill 1024x1024, JPEG q80"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row n_darkroom "darkroom (libpng)"
    fmt_row n_pillow "Pillow ImageOps.fit"
    fmt_row n_vips "vipsthumbnail batch"
    fmt_row n_magick "ImageMagick -thumbnail"
    echo
    echo "## G: GIF sources (256 colours), fill 1024x1024, JPEG q80"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row g_darkroom "darkroom (giflib)"
    fmt_row g_pillow "Pillow ImageOps.fit"
    fmt_row g_vips "vipsthumbnail batch"
    fmt_row g_magick "ImageMagick -thumbnail"
    echo
    echo "## H: HEIC sources, fill 1024x1024, JPEG q80"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row h_darkroom "darkroom (libheif)"
    fmt_row h_pillow "Pillow + pillow-heif ImageOps.fit"
    fmt_row h_vips "vipsthumbnail batch"
    fmt_row h_magick "ImageMagick -thumbnail"
    echo
    echo "## F: TIFF sources (LZW, RGB), fill 1024x1024, JPEG q80"
    echo
    echo "| tool | best s | median s | s/image | images/s | vs darkroom |"
    echo "|---|---:|---:|---:|---:|---|"
    fmt_row f_darkroom "darkroom (libtiff)"
    fmt_row f_pillow "Pillow ImageOps.fit"
    fmt_row f_vips "vipsthumbnail batch"
    fmt_row f_magick "ImageMagick -thumbnail"
    echo
    echo "## Targets"
    echo
    echo '```'
    target_ratio "P1 darkroom vs Pillow" p1_pillow p1_darkroom 2.0
    target_ratio "P1 darkroom vs vips CLI" p1_vips p1_darkroom 3.0
    if ok p1_darkroom && ok p1_floor; then
        awk -v d="${BEST[p1_darkroom]}" -v f="${BEST[p1_floor]}" 'BEGIN {
            r = d / f; printf "%s P1 darkroom time vs libjpeg floor: %.2fx (target <= 1.5x)\n", (r <= 1.5 ? "PASS" : "FAIL"), r }'
    else
        echo "SKIP P1 darkroom vs floor: $(why_not p1_darkroom p1_floor)"
    fi
    target_ratio "T darkroom vs Pillow draft" t_pillow t_darkroom 1.0
    echo "$RSS_LINE"
    echo '```'
} >"$REPORT"

mkdir -p "$HERE/out"
cp "$REPORT" "$HERE/out/pipeline-latest.md"
cat "$REPORT"
log "report written to $HERE/out/pipeline-latest.md"
