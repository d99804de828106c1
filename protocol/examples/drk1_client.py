#!/usr/bin/env python3
"""A small DRK1 producer in Python, written from protocol/drk1.md alone.

It submits one JPEG with a pipeline, waits for the job's `stored` event the
way section 8 asks (SUB on the events socket, REPLAY on the frontend for
anything missed), then fetches the full-resolution image and the thumbnail
from the storage node with GET and checks each against its record: byte
count, SHA-256 and the JPEG's own dimensions.

    python3 drk1_client.py photo.jpg --pipeline 'scale:1024x1024 | crop:square'
    python3 drk1_client.py photo.jpg --pipeline grayscale --json --out results/

Needs pyzmq (`python3 -m pip install pyzmq`). Exit status: 0 stored and
verified, 1 the job failed for good or a check did not hold, 2 usage,
protocol or connection trouble (including the timeout).
"""
import argparse
import hashlib
import json
import os
import struct
import sys
import time
import uuid

try:
    import zmq
except ImportError:  # pragma: no cover - reported to the user
    sys.stderr.write("drk1_client: needs pyzmq (python3 -m pip install pyzmq)\n")
    sys.exit(2)

# Section 2.1: default endpoints.
FRONTEND = "tcp://127.0.0.1:7700"
EVENTS = "tcp://127.0.0.1:7702"
STORE = "tcp://127.0.0.1:7703"

# Section 2.3 and 3: protocol id and command bytes.
DRK1 = b"DRK1"
ERROR, OK = 0x01, 0x04
SUBMIT, ACCEPTED, REJECTED = 0x10, 0x11, 0x12
REPLAY, REPLAY_END = 0x15, 0x16
GET, GET_REPLY = 0x34, 0x35
EVENT, EVENTS = 0x40, 0x41
TOPIC = b"ev"          # section 8: one EVENT per message
BATCH_TOPIC = b"eb"    # section 8: EVENTS, the events of one commit

# Section 8: event kinds.
KINDS = {1: "accepted", 2: "started", 3: "stored", 4: "retrying", 5: "failed", 6: "dead", 7: "revived",
         8: "discarded", 9: "cancelled"}
# Section 9.1: error names, for messages.
ERROR_NAMES = {100: "bad-version", 101: "malformed", 102: "unknown-command", 103: "unexpected-command",
               200: "queue-full", 201: "shutting-down", 300: "not-found", 301: "invalid-pipeline",
               302: "invalid-image", 303: "too-large", 304: "forbidden", 305: "conflict", 500: "internal"}
# Section 9.2: every socket sets ZMQ_MAXMSGSIZE, 65 MiB by default.
MAX_MESSAGE = 65 * 1024 * 1024
ULID_ALPHABET = set(b"0123456789ABCDEFGHJKMNPQRSTVWXYZ")


class ProtocolTrouble(Exception):
    """The peer sent something DRK1 does not allow, or did not answer."""


class JobFailed(Exception):
    """The job reached the dead-letter set (or was discarded)."""


# ---------------------------------------------------------------- encoding (section 2.4)

def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)
def u64(v): return struct.pack(">Q", v)


def read_uint(frame, size, what):
    if len(frame) != size:
        raise ProtocolTrouble(f"{what} must be {size} bytes, got {len(frame)}")
    return int.from_bytes(frame, "big")


def read_i32(frame, what):
    if len(frame) != 4:
        raise ProtocolTrouble(f"{what} must be 4 bytes, got {len(frame)}")
    return struct.unpack(">i", frame)[0]


def read_line(frame, what, max_bytes):
    if len(frame) > max_bytes:
        raise ProtocolTrouble(f"{what} is {len(frame)} bytes, at most {max_bytes}")
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolTrouble(f"{what} is not valid UTF-8") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ProtocolTrouble(f"{what} contains a control character")
    if text.startswith("\ufeff"):
        raise ProtocolTrouble(f"{what} starts with a byte-order mark")
    return text


def read_worker_id(frame, what):
    """Section 8: empty, or 1-64 bytes of printable ASCII without spaces (as in READY)."""
    if len(frame) > 64 or any(b <= 0x20 or b >= 0x7F for b in frame):
        raise ProtocolTrouble(f"{what} must be empty or 1-64 bytes of printable ASCII without spaces")
    return frame.decode("ascii")


def read_ulid(frame, what, optional=False):
    if optional and not frame:
        return None
    if len(frame) != 26 or not set(frame) <= ULID_ALPHABET or frame[0:1] > b"7":
        raise ProtocolTrouble(f"{what} is not a ULID")
    return frame.decode("ascii")


def options(thumb_w, thumb_h, quality, thumb_quality, flags=0, gravity=0):
    """Section 2.6: the 8-byte job options; flags 0 is auto subsampling, baseline; gravity 0 is center."""
    return struct.pack(">HHBBBB", thumb_w, thumb_h, quality, thumb_quality, flags, gravity)


def check_header(frames, expected_count, name):
    """Frames 0 and 1 and the frame count (sections 2.3, 9.2)."""
    if len(frames) < 2 or frames[0] != DRK1:
        got = frames[0][:16] if frames else b""
        raise ProtocolTrouble(f"expected protocol DRK1, got {got!r}")
    if len(frames[1]) != 1:
        raise ProtocolTrouble("frame 1 (command) must be 1 byte")
    if len(frames) != expected_count:
        raise ProtocolTrouble(f"{name}: expected {expected_count} frames, got {len(frames)}")


def decode_error(frames):
    """ERROR (section 4): request id, code, reason."""
    check_header(frames, 5, "ERROR")
    request = read_uint(frames[2], 8, "ERROR request id")
    code = read_uint(frames[3], 2, "ERROR code")
    reason = read_line(frames[4], "ERROR reason", 4096)
    return request, code, reason


def describe_code(code):
    return f"{code} {ERROR_NAMES.get(code, 'class ' + str(code // 100) + 'xx')}"


def decode_event(frames):
    """EVENT (section 8), frames counted from "DRK1" (the topic already removed)."""
    check_header(frames, 14, "EVENT")
    kind = read_uint(frames[4], 1, "EVENT kind")
    if kind not in KINDS:
        raise ProtocolTrouble(f"EVENT kind {kind} is not defined")
    step_index = read_i32(frames[10], "EVENT step index")
    if step_index < 0:
        raise ProtocolTrouble(f"EVENT step index is {step_index}, must be 0 or more")
    return {
        "seq": read_uint(frames[2], 8, "EVENT seq"),
        "time": read_uint(frames[3], 8, "EVENT time"),
        "kind": KINDS[kind],
        "jobId": read_ulid(frames[5], "EVENT job id"),
        "attempt": read_uint(frames[6], 4, "EVENT attempt"),
        "source": read_line(frames[7], "EVENT source name", 1024),
        "workerId": read_worker_id(frames[8], "EVENT worker id"),
        "recordId": read_ulid(frames[9], "EVENT record id", optional=True),
        "stepIndex": step_index,
        "step": read_line(frames[11], "EVENT step", 1024),
        "errorCode": read_line(frames[12], "EVENT error code", 64),
        "reason": read_line(frames[13], "EVENT reason", 4096),
    }


def decode_batch(frames):
    """EVENTS (section 8), frames counted from "DRK1" (the topic already
    removed): `count` records, each the twelve EVENT fields as u16 length +
    bytes, checked as the EVENT each stands for, seqs consecutive."""
    check_header(frames, 4, "EVENTS")
    count = read_uint(frames[2], 4, "EVENTS count")
    if not 1 <= count <= 1000:
        raise ProtocolTrouble(f"EVENTS count is {count}, must be 1 to 1000")
    data, position, events = frames[3], 0, []
    for index in range(count):
        fields = []
        for _ in range(12):
            if len(data) - position < 2:
                raise ProtocolTrouble(f"EVENTS ends inside event {index + 1} of {count}")
            length = int.from_bytes(data[position:position + 2], "big")
            position += 2
            if len(data) - position < length:
                raise ProtocolTrouble(f"EVENTS ends inside event {index + 1} of {count}")
            fields.append(data[position:position + length])
            position += length
        event = decode_event([DRK1, u8(EVENT)] + fields)
        if events and event["seq"] != events[-1]["seq"] + 1:
            raise ProtocolTrouble(f"EVENTS event {index + 1} has seq {event['seq']}, must be {events[-1]['seq'] + 1}")
        events.append(event)
    if position != len(data):
        raise ProtocolTrouble(f"EVENTS has {len(data) - position} byte(s) after its {count} event(s)")
    return events


def failure_text(event):
    """Section 6.5: steps count from 1; 0 means not in a step (the reason names the stage)."""
    head = f"step {event['stepIndex']} {event['step']}: " if event["stepIndex"] >= 1 else ""
    code = f"{event['errorCode']}: " if event["errorCode"] else ""
    return head + code + event["reason"]


def webp_size(data):
    """Width and height from a WebP's first chunk (VP8, VP8L or VP8X), or None."""
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        return (int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF)
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def image_size(data):
    """("jpeg" or "webp", (width, height)) from a file's header, or (None, None)."""
    if data[:4] == b"RIFF":
        size = webp_size(data)
        return ("webp", size) if size else (None, None)
    size = jpeg_size(data)
    return ("jpeg", size) if size else (None, None)


def jpeg_size(data):
    """Width and height from the first SOF marker of a JPEG, or None."""
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            if i + 9 > len(data):
                return None
            height = int.from_bytes(data[i + 5:i + 7], "big")
            width = int.from_bytes(data[i + 7:i + 9], "big")
            return width, height
        if marker == 0xDA or length < 2:
            return None
        i += 2 + length
    return None


# ---------------------------------------------------------------- the client

class Client:
    def __init__(self, args):
        self.args = args
        self.context = zmq.Context()
        self.request_id = 0
        self.deadline = time.monotonic() + args.timeout
        self.frontend = self.socket(zmq.DEALER, args.frontend)
        # Section 8: subscribe before submitting, to "ev" (EVENT) or, with
        # --batched-events, to "eb" (EVENTS).
        self.topic = BATCH_TOPIC if args.batched_events else TOPIC
        self.events = self.socket(zmq.SUB, args.events)
        self.events.setsockopt(zmq.SUBSCRIBE, self.topic)
        self.live_messages = 0     # messages taken from the SUB socket
        self.store = self.socket(zmq.DEALER, args.store)

    def socket(self, kind, endpoint):
        s = self.context.socket(kind)
        s.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(endpoint)
        return s

    def close(self):
        for s in (self.frontend, self.events, self.store):
            s.close(0)
        self.context.term()

    def next_request_id(self):
        self.request_id += 1
        return self.request_id

    def remaining_ms(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ProtocolTrouble(f"timed out after {self.args.timeout:g} s")
        return int(left * 1000) + 1

    def receive(self, sock, what):
        """The next message on a socket, within the overall timeout."""
        if not sock.poll(self.remaining_ms()):
            raise ProtocolTrouble(f"timed out after {self.args.timeout:g} s waiting for {what}")
        return sock.recv_multipart()

    # ------------------------------------------------ SUBMIT (section 5.1)
    def submit(self, image, source):
        a = self.args
        rid = self.next_request_id()
        # Frame 8, the submit key: the broker queues one job per key, so
        # sending this SUBMIT again after a timeout could not queue it twice.
        key = uuid.uuid4().hex.encode("ascii")
        # Section 2.6: bits 3-4 are the full-resolution output's format, bits 5-6 the thumbnail's (0 JPEG, 1 WebP).
        formats = {"jpeg": 0, "webp": 1}
        flags = formats[a.format] << 3 | formats[a.thumb_format or a.format] << 5
        frames = [DRK1, u8(SUBMIT), u64(rid), u8(a.priority), options(a.thumb[0], a.thumb[1], a.quality, a.thumb_quality, flags),
                  a.pipeline.encode("utf-8"), source.encode("utf-8"), image, key]
        if a.expires_in is not None or a.time_limit is not None:
            # Frames 9 to 12 are positional: not before 0 (at once), an empty
            # attempts frame (the broker's own number), the deadline (0 for
            # none), then the time limit in seconds.
            deadline = 0 if a.expires_in is None else int(time.time() * 1000) + int(a.expires_in * 1000)
            frames += [u64(0), b"", u64(deadline)]
            if a.time_limit is not None:
                frames.append(u32(a.time_limit))
        self.frontend.send_multipart(frames)
        while True:
            frames = self.receive(self.frontend, "ACCEPTED")
            check_header(frames, len(frames), "reply")
            command = frames[1][0]
            if command == ACCEPTED:
                check_header(frames, 5, "ACCEPTED")
                if read_uint(frames[2], 8, "ACCEPTED request id") != rid:
                    continue
                return read_ulid(frames[3], "ACCEPTED job id"), read_uint(frames[4], 8, "ACCEPTED event seq")
            if command == REJECTED:
                check_header(frames, 5, "REJECTED")
                code = read_uint(frames[3], 2, "REJECTED code")
                raise JobFailed(f"rejected ({describe_code(code)}): {read_line(frames[4], 'reason', 4096)}")
            if command == ERROR:
                _, code, reason = decode_error(frames)
                raise ProtocolTrouble(f"broker answered ERROR {describe_code(code)}: {reason}")
            # Anything else (a stray EVENT, say) is not the answer; keep waiting.

    # ------------------------------------------------ events (sections 5.3 and 8)
    def wait_for_outcome(self, job_id, first_seq):
        """Follows events from `first_seq` until the job is stored (returns the
        event) or dead/discarded (raises JobFailed). Events come from the SUB
        socket and from REPLAY answers, and are all handled alike, by seq
        (section 5.3): duplicates are dropped, and any gap is filled with
        REPLAY from the first missing seq."""
        next_seq = first_seq          # the first seq not yet handled
        pending = {}                  # seq -> event, seen ahead of next_seq
        replay_open = None            # request id of the REPLAY in flight
        history = []

        def ask_replay():
            nonlocal replay_open
            replay_open = self.next_request_id()
            self.frontend.send_multipart([DRK1, u8(REPLAY), u64(replay_open), u64(next_seq), u32(0)])

        # The SUB socket may have joined after our events were published, so
        # start with one REPLAY from the ACCEPTED seq (section 8, last rule).
        ask_replay()
        poller = zmq.Poller()
        poller.register(self.frontend, zmq.POLLIN)
        poller.register(self.events, zmq.POLLIN)
        quiet_since = time.monotonic()
        while True:
            ready = dict(poller.poll(min(self.remaining_ms(), 1000)))
            incoming = []
            replay_last = None            # last seq of a REPLAY-END just read
            if self.events in ready:
                frames = self.events.recv_multipart()
                if not frames or frames[0] != self.topic:
                    raise ProtocolTrouble(f"events: frame 0 (topic) must be {self.topic.decode()!r}")
                self.live_messages += 1
                if self.topic == BATCH_TOPIC:
                    incoming.extend(decode_batch(frames[1:]))
                else:
                    incoming.append(decode_event(frames[1:]))
            if self.frontend in ready:
                frames = self.frontend.recv_multipart()
                check_header(frames, len(frames), "reply")
                command = frames[1][0]
                if command == EVENT:
                    # A replayed event carries no request id: it is an event
                    # like any other, even one of a REPLAY given up on.
                    incoming.append(decode_event(frames))
                elif command == REPLAY_END:
                    check_header(frames, 5, "REPLAY-END")
                    rid = read_uint(frames[2], 8, "REPLAY-END request id")
                    last = read_uint(frames[3], 8, "REPLAY-END last seq")
                    head = read_uint(frames[4], 8, "REPLAY-END head seq")
                    if rid == replay_open:
                        replay_open = None
                        replay_last = last
                        # Section 5.3: a short page means ask again from last + 1.
                        if last < head:
                            ask_replay()
                elif command == ERROR:
                    _, code, reason = decode_error(frames)
                    raise ProtocolTrouble(f"broker answered ERROR {describe_code(code)}: {reason}")
            for event in incoming:
                if event["seq"] >= next_seq:
                    pending[event["seq"]] = event
            before = next_seq
            next_seq, done = self.handle_in_order(pending, next_seq, job_id, history)
            # The events of a REPLAY all arrive before its REPLAY-END. A seq
            # at or below its last seq that is still missing was pruned
            # (section 5.3): nothing older is kept, so go on from the oldest
            # event that came.
            if done is None and replay_last is not None and next_seq <= replay_last and pending:
                next_seq = min(pending)
                next_seq, done = self.handle_in_order(pending, next_seq, job_id, history)
            if done is not None:
                return done, history
            if next_seq != before:
                quiet_since = time.monotonic()
            # A gap (events ahead of one we lack), or a long quiet spell in
            # which a REPLAY-END may have been lost: ask again.
            stale = time.monotonic() - quiet_since > 5
            if (pending and replay_open is None) or stale:
                quiet_since = time.monotonic()
                ask_replay()

    def handle_in_order(self, pending, next_seq, job_id, history):
        """Handles the events of `pending` from `next_seq` on, while they
        follow each other. Returns the next seq and the `stored` event if it
        came; raises JobFailed if the job is dead or discarded."""
        while next_seq in pending:
            event = pending.pop(next_seq)
            next_seq += 1
            if event["jobId"] != job_id:
                continue
            history.append(event)
            self.progress(event)
            if event["kind"] == "stored":
                if not event["recordId"]:
                    raise ProtocolTrouble("stored event without a record id")
                return next_seq, event
            if event["kind"] == "dead":
                raise JobFailed(f"job {job_id} is dead: {failure_text(event)}")
            if event["kind"] == "discarded":
                raise JobFailed(f"job {job_id} was discarded")
            if event["kind"] == "cancelled":
                # With job.expired, its deadline passed before a worker started it.
                why = f": {failure_text(event)}" if event["errorCode"] else ""
                raise JobFailed(f"job {job_id} was cancelled{why}")
        return next_seq, None

    def progress(self, event):
        if self.args.json:
            return
        line = f"seq {event['seq']}: {event['kind']}"
        if event["attempt"]:
            line += f" (attempt {event['attempt']})"
        if event["errorCode"] or event["reason"]:
            line += f": {failure_text(event)}"
        print(line, file=sys.stderr)

    # ------------------------------------------------ GET (section 11)
    def get(self, ident, variant):
        rid = self.next_request_id()
        self.store.send_multipart([DRK1, u8(GET), u64(rid), ident.encode("ascii"), u8(variant)])
        while True:
            frames = self.receive(self.store, "GET-REPLY")
            check_header(frames, len(frames), "reply")
            command = frames[1][0]
            if command == ERROR:
                got, code, reason = decode_error(frames)
                if got == rid:
                    raise ProtocolTrouble(f"storage node answered ERROR {describe_code(code)}: {reason}")
                continue
            if command != GET_REPLY:
                raise ProtocolTrouble(f"expected GET-REPLY, got command 0x{command:02x}")
            check_header(frames, 6, "GET-REPLY")
            if read_uint(frames[2], 8, "GET-REPLY request id") != rid:
                continue
            if read_uint(frames[3], 1, "GET-REPLY variant") != variant:
                raise ProtocolTrouble("GET-REPLY carries the other variant")
            try:
                record = json.loads(frames[4].decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                raise ProtocolTrouble(f"GET-REPLY record is not JSON: {error}") from None
            if not isinstance(record, dict):
                raise ProtocolTrouble("GET-REPLY record is not a JSON object")
            return record, frames[5]


def verify(record, image, key, problems):
    """Checks one image against its half of the record (section 10.3)."""
    info = record.get(key)
    if not isinstance(info, dict):
        problems.append(f"record has no '{key}' object")
        return {}
    digest = hashlib.sha256(image).hexdigest()
    kind, size = image_size(image)
    result = {"width": info.get("width"), "height": info.get("height"), "bytes": len(image), "sha256": digest,
              "format": kind, "headerWidth": size[0] if size else None, "headerHeight": size[1] if size else None}
    if info.get("sha256") != digest:
        problems.append(f"{key}: sha256 {digest} does not match the record's {info.get('sha256')}")
    if info.get("bytes") != len(image):
        problems.append(f"{key}: {len(image)} bytes, the record says {info.get('bytes')}")
    if size is None:
        problems.append(f"{key}: neither a JPEG with a frame header nor a WebP")
    else:
        if size != (info.get("width"), info.get("height")):
            problems.append(f"{key}: {kind} is {size[0]}x{size[1]}, the record says {info.get('width')}x{info.get('height')}")
        # A storage node from before WebP outputs sends no format: JPEG.
        if kind != info.get("format", "jpeg"):
            problems.append(f"{key}: the bytes are {kind}, the record says {info.get('format')}")
    result["verified"] = not any(p.startswith(key + ":") for p in problems)
    return result


def parse_size(text):
    try:
        w, h = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WxH, got '{text}'") from None
    if not (1 <= w <= 4096 and 1 <= h <= 4096):
        raise argparse.ArgumentTypeError("each side must be 1…4096")
    return w, h


def ranged(low, high):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}…{high}")
        return value
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(description="Submit a JPEG to Darkroom over DRK1 and verify the stored result.")
    parser.add_argument("image", help="the JPEG file to submit")
    parser.add_argument("--pipeline", "--ops", required=True, help="pipeline text, e.g. 'scale:1024x1024 | crop:square'")
    parser.add_argument("--frontend", default=FRONTEND, help=f"broker frontend (default {FRONTEND})")
    parser.add_argument("--events", default=EVENTS, help=f"broker events (default {EVENTS})")
    parser.add_argument("--store", default=STORE, help=f"storage node (default {STORE})")
    parser.add_argument("--priority", type=ranged(0, 9), default=0)
    parser.add_argument("--thumb", type=parse_size, default=(256, 256), help="thumbnail WxH (default 256x256)")
    parser.add_argument("--quality", type=ranged(1, 100), default=95)
    parser.add_argument("--thumb-quality", type=ranged(1, 100), default=70)
    parser.add_argument("--format", choices=("jpeg", "webp"), default="jpeg", help="file format of the outputs (default jpeg)")
    parser.add_argument("--thumb-format", choices=("jpeg", "webp"), help="file format of the thumbnail (default: --format)")
    parser.add_argument("--expires-in", type=float, help="seconds: a job no worker has started by then is not run (SUBMIT frame 11)")
    parser.add_argument("--time-limit", type=int, help="seconds, 1-604800: the longest an attempt may run on a worker (SUBMIT frame 12)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for the whole exchange (default 60)")
    parser.add_argument("--out", help="directory to write full.jpg and thumb.jpg (or .webp) into")
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    parser.add_argument("--batched-events", action="store_true",
                        help="follow EVENTS (topic 'eb', one message per broker commit) instead of EVENT ('ev')")
    args = parser.parse_args(argv)

    try:
        with open(args.image, "rb") as f:
            image = f.read()
    except OSError as error:
        parser.error(f"cannot read {args.image}: {error.strerror}")
    if not image:
        parser.error(f"{args.image} is empty")
    pipeline_bytes = len(args.pipeline.encode("utf-8"))
    if not 1 <= pipeline_bytes <= 4096 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in args.pipeline):
        parser.error("the pipeline must be one line of 1…4096 bytes")
    source = os.path.basename(args.image).encode("utf-8")[:1024].decode("utf-8", "ignore")

    summary = {"ok": False, "source": source, "pipeline": args.pipeline}
    status = 2
    client = Client(args)
    try:
        job_id, seq = client.submit(image, source)
        summary.update(jobId=job_id, acceptedSeq=seq)
        stored, history = client.wait_for_outcome(job_id, seq)
        summary["events"] = [{"seq": e["seq"], "kind": e["kind"]} for e in history]
        summary["liveMessages"] = client.live_messages
        summary["recordId"] = stored["recordId"]
        problems = []
        full_record, full = client.get(stored["recordId"], 0)
        thumb_record, thumb = client.get(job_id, 1)
        for record in (full_record, thumb_record):
            if record.get("id") != stored["recordId"] or record.get("jobId") != job_id:
                problems.append(f"GET-REPLY names record {record.get('id')} of job {record.get('jobId')}")
        summary["full"] = verify(full_record, full, "full", problems)
        summary["thumb"] = verify(thumb_record, thumb, "thumb", problems)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            extension = {"jpeg": "jpg", "webp": "webp"}
            for name, data in (("full." + extension.get(image_size(full)[0], "bin"), full),
                               ("thumb." + extension.get(image_size(thumb)[0], "bin"), thumb)):
                with open(os.path.join(args.out, name), "wb") as f:
                    f.write(data)
        summary["problems"] = problems
        summary["ok"] = not problems
        status = 0 if not problems else 1
        if not args.json:
            for p in problems:
                print(f"drk1_client: {p}", file=sys.stderr)
            f, t = summary["full"], summary["thumb"]
            print(f"job {job_id} stored as record {stored['recordId']}: full {f['width']}x{f['height']} "
                  f"({f['bytes']} bytes), thumbnail {t['width']}x{t['height']} ({t['bytes']} bytes)"
                  + (", sha256 verified" if not problems else ""))
    except JobFailed as failure:
        summary["error"] = str(failure)
        status = 1
    except ProtocolTrouble as trouble:
        summary["error"] = str(trouble)
        status = 2
    finally:
        client.close()
    if "error" in summary and not args.json:
        print(f"drk1_client: {summary['error']}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main())
