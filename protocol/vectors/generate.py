#!/usr/bin/env python3
"""Writes drk1.json: DRK1 test vectors, built from protocol/drk1.md alone.

This encoder is independent of the Swift one: the Swift tests decode every
vector, check its stated fields, and re-encode it to the same bytes, so the
two implementations check each other.

Run from anywhere:  python3 protocol/vectors/generate.py
"""
import json
import os
import struct

DRK1 = b"DRK1"
TOPIC = b"ev"
BATCH_TOPIC = b"eb"

# Command bytes (drk1.md, "Commands").
ERROR, PING, PONG, OK = 0x01, 0x02, 0x03, 0x04
SUBMIT, ACCEPTED, REJECTED, STATUS, STATUS_REPLY = 0x10, 0x11, 0x12, 0x13, 0x14
REPLAY, REPLAY_END, DEAD_LIST, DEAD_LIST_REPLY = 0x15, 0x16, 0x17, 0x18
DEAD_RETRY, DEAD_DISCARD = 0x19, 0x1A
JOB_INFO, JOB_INFO_REPLY, CANCEL = 0x1B, 0x1C, 0x1D
PAUSE, RESUME = 0x1E, 0x1F
JOB_LIST, JOB_LIST_REPLY = 0x50, 0x51
READY, CREDIT, JOB, DONE, FAIL, HEARTBEAT, DISCONNECT, HOLDING = 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27
CANCEL_JOB = 0x28
STORE, STORED, LIST, LIST_REPLY, GET, GET_REPLY = 0x30, 0x31, 0x32, 0x33, 0x34, 0x35
DELETE, STATS, STATS_REPLY = 0x36, 0x37, 0x38
EVENT, EVENTS = 0x40, 0x41

JOB_ID = "01JBX3Z7Q8M4N6P2R5T9V0W1XY"
JOB_ID_2 = "01JBX3Z7Q8M4N6P2R5T9V0W1XZ"
RECORD_ID = "01JBX3Z9A2B3C4D5E6F7G8H9JK"
IMAGE = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffd9")
THUMB = bytes.fromhex("ffd8ffdbffd9")
PIPELINE = "scale:2048x2048,mode=fill | crop:square | glitch:seed=7"


def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)
def i32(v): return struct.pack(">i", v)
def u64(v): return struct.pack(">Q", v)
def text(s): return s.encode("utf-8")
def options(tw, th, q, tq, flags=0, gravity=0): return struct.pack(">HHBBBB", tw, th, q, tq, flags, gravity)
# Section 2.6: the output flags (byte 6 of the options).
SUB_AUTO, SUB_444, SUB_422, SUB_420, PROGRESSIVE = 0, 1, 2, 3, 4
WEBP, THUMB_WEBP = 1 << 3, 1 << 5  # bits 3-4 and 5-6: 0 JPEG, 1 WebP, 2 PNG
PNG, THUMB_PNG = 2 << 3, 2 << 5
AVIF, THUMB_AVIF = 3 << 3, 3 << 5
def size(w, h): return struct.pack(">II", w, h)
def js(obj): return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
def msg(cmd, *fields): return [DRK1, u8(cmd), *fields]


# Section 3.2: the commands each end of a socket reads. The server is the
# end that binds (the broker, the storage node); the peer connects.
TO_SERVER = {
    "frontend": {ERROR, PING, SUBMIT, STATUS, REPLAY, DEAD_LIST, DEAD_RETRY, DEAD_DISCARD, JOB_INFO, CANCEL, PAUSE, RESUME, JOB_LIST},
    "backend": {ERROR, READY, CREDIT, DONE, FAIL, HEARTBEAT, DISCONNECT, HOLDING, PING, PONG},
    "store": {ERROR, PING, STORE, LIST, GET, DELETE, STATS},
}
# Section 3.1: the commands whose frame 2 is a request id.
CARRIES_REQUEST_ID = {ERROR, PING, PONG, OK} | set(range(SUBMIT, RESUME + 1)) | {JOB_LIST, JOB_LIST_REPLY} | set(range(STORE, STATS_REPLY + 1))

vectors = []
malformed = []


def vector(name, socket, description, frames, fields, receiver=None):
    entry = {"name": name, "socket": socket, "description": description}
    if socket != "events":
        # Every vector of a request socket says which end reads it (given
        # for a command that travels both ways).
        entry["receiver"] = receiver or ("server" if frames[1][0] in TO_SERVER[socket] else "peer")
    entry.update(frames=[f.hex() for f in frames], fields={k: str(v) for k, v in fields.items()})
    vectors.append(entry)


def error_request_id(frames, code):
    """Section 9.2: the request id of the ERROR that answers a bad message."""
    if code in (100, 102) or len(frames) < 3 or frames[0] != DRK1 or len(frames[1]) != 1:
        return 0
    if frames[1][0] in CARRIES_REQUEST_ID and len(frames[2]) == 8:
        return int.from_bytes(frames[2], "big")
    return 0


def bad(name, socket, description, frames, code, reason, receiver=None):
    """`receiver` is given when the message is bad only because that end of
    the socket reads it (section 3.2): the other end would decode it. Without
    it, the message is bad for the end that would read it (the server when
    the command does not say), and for a decoder that reads both ways."""
    entry = {"name": name, "socket": socket, "description": description}
    if receiver:
        entry.update(receiver=receiver, wrongDirection=True)
    elif socket != "events":
        known = len(frames) > 1 and frames[0] == DRK1 and len(frames[1]) == 1
        entry["receiver"] = "peer" if known and frames[1][0] not in TO_SERVER[socket] else "server"
    entry.update(frames=[f.hex() for f in frames], code=code, reason=reason)
    if socket != "events":
        entry["requestID"] = error_request_id(frames, code)
    malformed.append(entry)


# ---------------------------------------------------------------- common
vector("error", "frontend", "ERROR answering request 7: queue-full",
       msg(ERROR, u64(7), u16(200), text("queue is full (10000 jobs)")),
       {"command": "ERROR", "requestID": 7, "code": 200, "reason": "queue is full (10000 jobs)"})
vector("error-backend", "backend", "ERROR on the backend (request id 0)",
       msg(ERROR, u64(0), u16(103), text("CREDIT before READY")),
       {"command": "ERROR", "requestID": 0, "code": 103})
vector("ping", "frontend", "PING with request id 1", msg(PING, u64(1)), {"command": "PING", "requestID": 1})
vector("pong", "store", "PONG answering request id 1", msg(PONG, u64(1)), {"command": "PONG", "requestID": 1})
vector("ok", "frontend", "OK: 3 dead jobs requeued", msg(OK, u64(9), u64(3)),
       {"command": "OK", "requestID": 9, "count": 3})

# ---------------------------------------------------------------- frontend
vector("submit", "frontend", "SUBMIT request 42, priority 5, 256x256 thumb, q95/q70",
       msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("photos/IMG_0001.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 42, "priority": 5, "options.thumbnailWidth": 256,
        "options.thumbnailHeight": 256, "options.quality": 95, "options.thumbnailQuality": 70,
        "pipeline": PIPELINE, "sourceName": "photos/IMG_0001.jpg", "image.count": len(IMAGE)})
vector("submit-unicode", "frontend", "SUBMIT with a non-ASCII source name, empty-free minimum image, max priority",
       msg(SUBMIT, u64(0xFFFFFFFFFFFFFFFF), u8(9), options(1, 4096, 1, 100), text("grayscale"), text("Été/ç.jpg"), b"\xff"),
       {"command": "SUBMIT", "requestID": 0xFFFFFFFFFFFFFFFF, "priority": 9, "options.thumbnailWidth": 1,
        "options.thumbnailHeight": 4096, "sourceName": "Été/ç.jpg", "image.count": 1})
vector("submit-key", "frontend", "SUBMIT request 44 with a submit key (frame 8), so a resend returns the same job",
       msg(SUBMIT, u64(44), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, text(JOB_ID_2)),
       {"command": "SUBMIT", "requestID": 44, "priority": 5, "pipeline": "grayscale", "sourceName": "a.jpg",
        "image.count": len(IMAGE), "submitKey": JOB_ID_2})
vector("submit-output-flags", "frontend", "SUBMIT asking for 4:2:0 progressive outputs (flags 0x07)",
       msg(SUBMIT, u64(45), u8(5), options(320, 240, 80, 60, SUB_420 | PROGRESSIVE), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 45, "options.thumbnailWidth": 320, "options.thumbnailHeight": 240,
        "options.quality": 80, "options.thumbnailQuality": 60, "options.subsampling": "420", "options.progressive": "true"})
vector("submit-output-flags-444", "frontend", "SUBMIT asking for 4:4:4 baseline outputs (flags 0x01) and a smart thumbnail (gravity 9)",
       msg(SUBMIT, u64(46), u8(5), options(256, 256, 75, 70, SUB_444, 9), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 46, "options.subsampling": "444", "options.progressive": "false",
        "options.thumbnailGravity": "smart"})
vector("submit-webp", "frontend", "SUBMIT asking for both outputs as WebP (flags 0x28)",
       msg(SUBMIT, u64(48), u8(5), options(256, 256, 80, 70, WEBP | THUMB_WEBP), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 48, "options.format": "webp", "options.thumbnailFormat": "webp",
        "options.subsampling": "auto", "options.progressive": "false"})
vector("submit-webp-thumbnail", "frontend", "SUBMIT asking for a JPEG at full resolution and a WebP thumbnail (flags 0x20)",
       msg(SUBMIT, u64(49), u8(5), options(256, 256, 95, 70, THUMB_WEBP), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 49, "options.format": "jpeg", "options.thumbnailFormat": "webp"})
vector("submit-png", "frontend", "SUBMIT asking for a PNG at full resolution and a WebP thumbnail (flags 0x30)",
       msg(SUBMIT, u64(50), u8(5), options(256, 256, 95, 70, PNG | THUMB_WEBP), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 50, "options.format": "png", "options.thumbnailFormat": "webp"})
vector("job-png-thumbnail", "backend", "JOB asking for a JPEG at full resolution and a PNG thumbnail (flags 0x40)",
       msg(JOB, text(JOB_ID), u32(1), options(256, 256, 90, 70, THUMB_PNG), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "JOB", "jobID": JOB_ID, "options.format": "jpeg", "options.thumbnailFormat": "png"})
vector("submit-avif", "frontend", "SUBMIT asking for both outputs as AVIF (flags 0x78)",
       msg(SUBMIT, u64(51), u8(5), options(256, 256, 60, 50, AVIF | THUMB_AVIF), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "SUBMIT", "requestID": 51, "options.format": "avif", "options.thumbnailFormat": "avif"})
vector("submit-scheduled", "frontend", "SUBMIT request 47 with a submit key and a not-before time (frame 9)",
       msg(SUBMIT, u64(47), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, text(JOB_ID_2), u64(1767225600000)),
       {"command": "SUBMIT", "requestID": 47, "submitKey": JOB_ID_2, "notBefore": 1767225600000})
vector("submit-scheduled-no-key", "frontend", "SUBMIT request 48 scheduled without a submit key: frame 8 is empty",
       msg(SUBMIT, u64(48), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, b"", u64(1767225600000)),
       {"command": "SUBMIT", "requestID": 48, "submitKey": "nil", "notBefore": 1767225600000})
vector("submit-attempts", "frontend", "SUBMIT request 49 whose job gets at most 3 attempts (frame 10), with no key and no schedule",
       msg(SUBMIT, u64(49), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, b"", u64(0), u16(3)),
       {"command": "SUBMIT", "requestID": 49, "submitKey": "nil", "notBefore": 0, "maxAttempts": 3})
vector("submit-expires", "frontend", "SUBMIT request 50 with a key, 2 attempts and a deadline (frame 11)",
       msg(SUBMIT, u64(50), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, text(JOB_ID_2), u64(0), u16(2),
           u64(1767229200000)),
       {"command": "SUBMIT", "requestID": 50, "submitKey": JOB_ID_2, "notBefore": 0, "maxAttempts": 2, "expires": 1767229200000})
vector("submit-expires-only", "frontend", "SUBMIT request 51 with only a deadline: frames 8 and 10 empty, frame 9 at once",
       msg(SUBMIT, u64(51), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, b"", u64(0), b"", u64(1767229200000)),
       {"command": "SUBMIT", "requestID": 51, "submitKey": "nil", "notBefore": 0, "maxAttempts": "nil", "expires": 1767229200000})
vector("submit-time-limit", "frontend", "SUBMIT request 52 with only a time limit of 90 s (frame 12): frames 8 and 10 empty, 9 and 11 zero",
       msg(SUBMIT, u64(52), u8(5), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, b"", u64(0), b"", u64(0), u32(90)),
       {"command": "SUBMIT", "requestID": 52, "submitKey": "nil", "notBefore": 0, "maxAttempts": "nil", "expires": 0, "timeLimit": 90})
vector("accepted", "frontend", "ACCEPTED request 42 as job " + JOB_ID + ", event seq 1001",
       msg(ACCEPTED, u64(42), text(JOB_ID), u64(1001)),
       {"command": "ACCEPTED", "requestID": 42, "jobID": JOB_ID, "eventSeq": 1001})
vector("rejected", "frontend", "REJECTED request 43: invalid-pipeline",
       msg(REJECTED, u64(43), u16(301), text("unknown operation 'blurr' at column 1")),
       {"command": "REJECTED", "requestID": 43, "code": 301, "reason": "unknown operation 'blurr' at column 1"})
vector("status", "frontend", "STATUS request 2", msg(STATUS, u64(2)), {"command": "STATUS", "requestID": 2})
status = {
    "protocolVersion": "DRK1", "time": 1730000000123, "eventSeq": 5000,
    "queue": {"ready": [0, 0, 0, 0, 0, 12, 0, 0, 0, 3], "delayed": 1, "inFlight": 4, "dead": 2, "limit": 100000},
    "workers": [{"id": "w-01JBX3", "host": "node-a", "pid": 4242, "slots": 2, "busy": 2, "credit": 0,
                 "lastHeartbeat": 1730000000001}],
    "rates": {"windowSeconds": 10, "accepted": 812.5, "stored": 790.25, "failed": 1.5},
}
vector("status-reply", "frontend", "STATUS-REPLY with one worker",
       msg(STATUS_REPLY, u64(2), js(status)),
       {"command": "STATUS-REPLY", "requestID": 2, "status.eventSeq": 5000, "status.queue.inFlight": 4,
        "status.queue.depth": 16, "status.workers.count": 1, "status.workers.0.host": "node-a",
        "status.rates.accepted": 812.5})
paused_status = {**status, "queue": {**status["queue"], "pausedSince": 1729999990000}, "workers": []}
vector("status-reply-paused", "frontend", "STATUS-REPLY while PAUSE holds dispatch (section 5.7)",
       msg(STATUS_REPLY, u64(4), js(paused_status)),
       {"command": "STATUS-REPLY", "requestID": 4, "status.queue.pausedSince": 1729999990000, "status.workers.count": 0})
vector("replay", "frontend", "REPLAY from seq 990, broker default limit",
       msg(REPLAY, u64(3), u64(990), u32(0)), {"command": "REPLAY", "requestID": 3, "fromSeq": 990, "limit": 0})
vector("replay-end", "frontend", "REPLAY-END: sent up to 1200, head is 1500",
       msg(REPLAY_END, u64(3), u64(1200), u64(1500)),
       {"command": "REPLAY-END", "requestID": 3, "lastSeq": 1200, "headSeq": 1500})
vector("replay-end-none", "frontend", "REPLAY-END for a REPLAY from 1501 when the head is 1500: nothing sent, last seq 1500",
       msg(REPLAY_END, u64(4), u64(1500), u64(1500)),
       {"command": "REPLAY-END", "requestID": 4, "lastSeq": 1500, "headSeq": 1500})
vector("replay-end-empty", "frontend", "REPLAY-END from a broker with no events yet (REPLAY from 0, read as 1): last seq 0",
       msg(REPLAY_END, u64(5), u64(0), u64(0)),
       {"command": "REPLAY-END", "requestID": 5, "lastSeq": 0, "headSeq": 0})
vector("dead-list", "frontend", "DEAD-LIST first page of 50",
       msg(DEAD_LIST, u64(4), u32(50), b""), {"command": "DEAD-LIST", "requestID": 4, "limit": 50, "after": "nil"})
vector("dead-list-after", "frontend", "DEAD-LIST next page after a job id",
       msg(DEAD_LIST, u64(5), u32(1000), text(JOB_ID)), {"command": "DEAD-LIST", "limit": 1000, "after": JOB_ID})
dead = {"total": 1, "jobs": [{
    "jobId": JOB_ID, "source": "bad.jpg", "pipeline": "crop:600x600+0+0", "priority": 0, "attempts": 1,
    "submitted": 1730000000000, "died": 1730000000500, "stepIndex": 1, "step": "crop:600x600+0+0",
    "errorCode": "image.invalid-argument", "reason": "rectangle exceeds image 500x400"}]}
vector("dead-list-reply", "frontend", "DEAD-LIST-REPLY with one dead job",
       msg(DEAD_LIST_REPLY, u64(4), js(dead)),
       {"command": "DEAD-LIST-REPLY", "requestID": 4, "list.total": 1, "list.jobs.0.jobID": JOB_ID,
        "list.jobs.0.stepIndex": 1, "list.jobs.0.errorCode": "image.invalid-argument"})
vector("dead-retry-all", "frontend", "DEAD-RETRY all", msg(DEAD_RETRY, u64(6), text("all")),
       {"command": "DEAD-RETRY", "requestID": 6, "target": "all"})
vector("dead-retry-one", "frontend", "DEAD-RETRY one job", msg(DEAD_RETRY, u64(7), text(JOB_ID)),
       {"command": "DEAD-RETRY", "target": JOB_ID})
vector("dead-discard", "frontend", "DEAD-DISCARD one job", msg(DEAD_DISCARD, u64(8), text(JOB_ID_2)),
       {"command": "DEAD-DISCARD", "requestID": 8, "target": JOB_ID_2})

vector("job-info", "frontend", "JOB-INFO: one job's story", msg(JOB_INFO, u64(9), text(JOB_ID)),
       {"command": "JOB-INFO", "requestID": 9, "jobID": JOB_ID})
lost = {"stepIndex": 0, "step": "", "code": "worker.lost", "reason": "worker w-1 stopped answering (no message for 9012 ms)"}
story = {"jobId": JOB_ID, "state": "stored", "source": "cat.jpg", "pipeline": "grayscale", "priority": 0,
         "submitted": 1730000000000, "finished": 1730000000900, "recordId": RECORD_ID, "complete": True,
         "attempts": [
             {"attempt": 1, "worker": "w-1", "started": 1730000000100, "ended": 1730000000400, "outcome": "failed",
              "failure": lost},
             {"attempt": 2, "worker": "w-2", "started": 1730000000500, "ended": 1730000000900, "outcome": "stored"}],
         "events": [
             {"seq": 10, "time": 1730000000000, "kind": "accepted", "attempt": 0},
             {"seq": 11, "time": 1730000000100, "kind": "started", "attempt": 1, "worker": "w-1"},
             {"seq": 12, "time": 1730000000400, "kind": "failed", "attempt": 1, "worker": "w-1", "failure": lost},
             {"seq": 13, "time": 1730000000400, "kind": "retrying", "attempt": 1, "failure": lost},
             {"seq": 14, "time": 1730000000500, "kind": "started", "attempt": 2, "worker": "w-2"},
             {"seq": 15, "time": 1730000000900, "kind": "stored", "attempt": 2, "worker": "w-2", "recordId": RECORD_ID}]}
vector("job-info-reply", "frontend", "JOB-INFO-REPLY: stored on its second attempt after its first worker was lost",
       msg(JOB_INFO_REPLY, u64(9), js(story)),
       {"command": "JOB-INFO-REPLY", "requestID": 9, "story.state": "stored", "story.attempts.count": 2,
        "story.attempts.0.outcome": "failed", "story.attempts.1.worker": "w-2", "story.recordID": RECORD_ID,
        "story.events.count": 6})

vector("cancel-one", "frontend", "CANCEL one job", msg(CANCEL, u64(10), text(JOB_ID)),
       {"command": "CANCEL", "requestID": 10, "target": JOB_ID})
vector("cancel-queued", "frontend", "CANCEL every queued job", msg(CANCEL, u64(11), text("queued")),
       {"command": "CANCEL", "requestID": 11, "target": "queued"})
vector("pause", "frontend", "PAUSE: hold dispatch", msg(PAUSE, u64(12)), {"command": "PAUSE", "requestID": 12})
vector("resume", "frontend", "RESUME: dispatch again", msg(RESUME, u64(13)), {"command": "RESUME", "requestID": 13})
vector("job-list", "frontend", "JOB-LIST: the queued jobs 21 to 40", msg(JOB_LIST, u64(14), text("queued"), u32(20), u32(20)),
       {"command": "JOB-LIST", "requestID": 14, "state": "queued", "offset": 20, "limit": 20})
vector("job-list-after", "frontend", "JOB-LIST: the next 50 queued jobs after a priority 5 job (frame 6, a cursor)",
       msg(JOB_LIST, u64(15), text("queued"), u32(0), u32(50), text("5-" + JOB_ID)),
       {"command": "JOB-LIST", "requestID": 15, "state": "queued", "offset": 0, "limit": 50, "after": "5-" + JOB_ID})
vector("job-list-after-delayed", "frontend", "JOB-LIST: the delayed jobs after one due at a Unix ms time",
       msg(JOB_LIST, u64(16), text("delayed"), u32(0), u32(10), text("1767229200000-" + JOB_ID)),
       {"command": "JOB-LIST", "requestID": 16, "state": "delayed", "after": "1767229200000-" + JOB_ID})
job_list = {"state": "running", "total": 2, "offset": 0, "jobs": [
    {"jobId": JOB_ID, "priority": 5, "source": "photos/IMG_0001.jpg", "attempt": 2, "worker": "w-01JBX3", "cancelling": True,
     "expires": 1767229200000, "cursor": JOB_ID},
    {"jobId": JOB_ID_2, "priority": 9, "source": "photos/IMG_0002.jpg", "attempt": 1, "worker": "w-01JBX4", "cursor": JOB_ID_2}]}
vector("job-list-reply", "frontend", "JOB-LIST-REPLY: two running jobs, one being cancelled",
       msg(JOB_LIST_REPLY, u64(14), js(job_list)),
       {"command": "JOB-LIST-REPLY", "requestID": 14, "list.state": "running", "list.total": 2, "list.jobs.count": 2,
        "list.jobs.0.worker": "w-01JBX3", "list.jobs.0.cancelling": "true", "list.jobs.1.priority": 9,
        "list.jobs.1.cursor": JOB_ID_2})

# ---------------------------------------------------------------- backend
vector("ready", "backend", "READY: worker on node-a, pid 4242, 2 slots",
       msg(READY, text("w-01JBX3"), text("node-a"), u32(4242), u32(2)),
       {"command": "READY", "workerID": "w-01JBX3", "host": "node-a", "pid": 4242, "slots": 2})
vector("credit", "backend", "CREDIT 2", msg(CREDIT, u32(2)), {"command": "CREDIT", "count": 2})
vector("job", "backend", "JOB attempt 2",
       msg(JOB, text(JOB_ID), u32(2), options(256, 256, 95, 70), text(PIPELINE), text("photos/IMG_0001.jpg"), IMAGE),
       {"command": "JOB", "jobID": JOB_ID, "attempt": 2, "options.quality": 95, "pipeline": PIPELINE,
        "image.count": len(IMAGE)})
vector("job-output-flags", "backend", "JOB attempt 1 whose outputs are 4:2:2 progressive (flags 0x06)",
       msg(JOB, text(JOB_ID), u32(1), options(256, 256, 95, 70, SUB_422 | PROGRESSIVE), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "JOB", "jobID": JOB_ID, "attempt": 1, "options.subsampling": "422", "options.progressive": "true",
        "options.thumbnailGravity": "center"})
vector("job-webp", "backend", "JOB whose full-resolution output is WebP and whose thumbnail is a progressive JPEG (flags 0x0C)",
       msg(JOB, text(JOB_ID), u32(1), options(256, 256, 90, 70, WEBP | PROGRESSIVE), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "JOB", "jobID": JOB_ID, "options.format": "webp", "options.thumbnailFormat": "jpeg", "options.progressive": "true"})
vector("job-thumbnail-gravity", "backend", "JOB whose thumbnail is cropped at the south-west (gravity 8)",
       msg(JOB, text(JOB_ID), u32(1), options(64, 64, 90, 70, 0, 8), text("grayscale"), text("a.jpg"), IMAGE),
       {"command": "JOB", "jobID": JOB_ID, "options.thumbnailGravity": "southwest", "options.subsampling": "auto"})
vector("job-time-limit", "backend", "JOB attempt 1 of a job with a time limit of 600 s (frame 8)",
       msg(JOB, text(JOB_ID), u32(1), options(256, 256, 95, 70), text("grayscale"), text("a.jpg"), IMAGE, u32(600)),
       {"command": "JOB", "jobID": JOB_ID, "attempt": 1, "timeLimit": 600})
vector("done", "backend", "DONE attempt 2 with a record id",
       msg(DONE, text(JOB_ID), u32(2), text(RECORD_ID)),
       {"command": "DONE", "jobID": JOB_ID, "attempt": 2, "recordID": RECORD_ID})
vector("fail-step", "backend", "FAIL, not retryable, in step 2 (steps count from 1)",
       msg(FAIL, text(JOB_ID), u32(1), u8(0), i32(2), text("crop:600x600+0+0"), text("image.invalid-argument"),
           text("rectangle exceeds image 500x400")),
       {"command": "FAIL", "jobID": JOB_ID, "attempt": 1, "retryable": "false", "failure.stepIndex": 2,
        "failure.step": "crop:600x600+0+0", "failure.code": "image.invalid-argument"})
vector("fail-store", "backend", "FAIL, retryable, outside any step (storage node unreachable): step index 0",
       msg(FAIL, text(JOB_ID), u32(3), u8(1), i32(0), b"", text("store.unreachable"), text("no STORED within 10 s")),
       {"command": "FAIL", "retryable": "true", "failure.stepIndex": 0, "failure.step": "",
        "failure.code": "store.unreachable"})
vector("fail-decode", "backend", "FAIL, not retryable, while decoding: step index 0, the reason names the stage",
       msg(FAIL, text(JOB_ID), u32(1), u8(0), i32(0), b"", text("image.corrupt"), text("decode: bad Huffman code")),
       {"command": "FAIL", "retryable": "false", "failure.stepIndex": 0, "failure.step": "",
        "failure.code": "image.corrupt", "failure.reason": "decode: bad Huffman code"})
vector("heartbeat", "backend", "HEARTBEAT", msg(HEARTBEAT), {"command": "HEARTBEAT"})
vector("ping-backend", "backend", "PING on the backend with request id 9 (a worker's health probe; no READY needed)",
       msg(PING, u64(9)), {"command": "PING", "requestID": 9})
vector("pong-backend", "backend", "PONG on the backend answering request id 9",
       msg(PONG, u64(9)), {"command": "PONG", "requestID": 9}, receiver="peer")
vector("disconnect", "backend", "DISCONNECT", msg(DISCONNECT), {"command": "DISCONNECT"})


def held(*entries):
    """HOLDING's frame 2: one 30-byte entry per job, job id then attempt."""
    return b"".join(text(job_id) + u32(attempt) for job_id, attempt in entries)


vector("holding-empty", "backend", "HOLDING with no jobs (a worker MAY also leave it out)",
       msg(HOLDING, b""), {"command": "HOLDING", "count": 0})
vector("holding", "backend", "HOLDING two jobs: one at attempt 2, one at attempt 1",
       msg(HOLDING, held((JOB_ID, 2), (JOB_ID_2, 1))),
       {"command": "HOLDING", "count": 2, "jobs.0.jobID": JOB_ID, "jobs.0.attempt": 2,
        "jobs.1.jobID": JOB_ID_2, "jobs.1.attempt": 1})

vector("cancel-job", "backend", "CANCEL-JOB: stop attempt 2 of a job", msg(CANCEL_JOB, text(JOB_ID), u32(2)),
       {"command": "CANCEL-JOB", "jobID": JOB_ID, "attempt": 2})

# ---------------------------------------------------------------- store
vector("store", "store", "STORE a 2048x2048 result and its 256x256 thumbnail (the image frames are placeholders: "
       "vectors fix the layout; a storage node refuses these bytes by the checks of section 11)",
       msg(STORE, u64(77), text(JOB_ID), text("photos/IMG_0001.jpg"), text(PIPELINE), size(2048, 2048), size(256, 256),
           IMAGE, THUMB),
       {"command": "STORE", "requestID": 77, "jobID": JOB_ID, "fullSize": "2048x2048", "thumbnailSize": "256x256",
        "full.count": len(IMAGE), "thumbnail.count": len(THUMB)})
vector("stored-new", "store", "STORED, new record", msg(STORED, u64(77), text(JOB_ID), text(RECORD_ID), u8(1)),
       {"command": "STORED", "requestID": 77, "jobID": JOB_ID, "recordID": RECORD_ID, "created": "true"})
vector("stored-again", "store", "STORED, the job already had a record (idempotent retry)",
       msg(STORED, u64(78), text(JOB_ID), text(RECORD_ID), u8(0)), {"command": "STORED", "created": "false"})
vector("error-invalid-image", "store", "ERROR answering STORE 77: the full image's header gives another size",
       msg(ERROR, u64(77), u16(302), text("full: header says 2047x2048, STORE declares 2048x2048")),
       {"command": "ERROR", "requestID": 77, "code": 302, "reason": "full: header says 2047x2048, STORE declares 2048x2048"})
vector("error-not-a-jpeg", "store", "ERROR answering STORE 78: the thumbnail is not a JPEG",
       msg(ERROR, u64(78), u16(302), text("thumbnail: not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box; starts with 3F 11 A0 07)")),
       {"command": "ERROR", "requestID": 78, "code": 302})
vector("list", "store", "LIST 20 newest", msg(LIST, u64(10), u32(20), b""),
       {"command": "LIST", "requestID": 10, "limit": 20, "before": "nil"})
record = {"id": RECORD_ID, "jobId": JOB_ID, "source": "photos/IMG_0001.jpg", "pipeline": PIPELINE,
          "created": 1730000000900,
          "full": {"width": 2048, "height": 2048, "bytes": len(IMAGE),
                   "sha256": "4d8c4e2b8d0f3b1e6e5b8f0a4c1d2e3f4a5b6c7d8e9f00112233445566778899", "format": "jpeg"},
          "thumb": {"width": 256, "height": 256, "bytes": len(THUMB),
                    "sha256": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", "format": "webp"}}
vector("list-reply", "store", "LIST-REPLY with one record", msg(LIST_REPLY, u64(10), js([record])),
       {"command": "LIST-REPLY", "requestID": 10, "records.count": 1, "records.0.id": RECORD_ID,
        "records.0.full.width": 2048, "records.0.full.format": "jpeg", "records.0.thumb.format": "webp"})
vector("get", "store", "GET the thumbnail of a job", msg(GET, u64(11), text(JOB_ID), u8(1)),
       {"command": "GET", "requestID": 11, "id": JOB_ID, "variant": "thumb"})
vector("get-reply", "store", "GET-REPLY with the thumbnail bytes",
       msg(GET_REPLY, u64(11), u8(1), js(record), THUMB),
       {"command": "GET-REPLY", "requestID": 11, "variant": "thumb", "record.id": RECORD_ID,
        "image.count": len(THUMB)})
vector("delete", "store", "DELETE a record", msg(DELETE, u64(12), text(RECORD_ID)),
       {"command": "DELETE", "requestID": 12, "id": RECORD_ID})
vector("stats", "store", "STATS", msg(STATS, u64(13)), {"command": "STATS", "requestID": 13})
stats = {"records": 10, "fullBytes": 52428800, "thumbBytes": 204800, "externalFiles": 10, "databaseBytes": 409600,
         "inlineBytes": 204800, "externalBytes": 52428800}
vector("stats-reply", "store", "STATS-REPLY", msg(STATS_REPLY, u64(13), js(stats)),
       {"command": "STATS-REPLY", "stats.records": 10, "stats.fullBytes": 52428800})

# ---------------------------------------------------------------- events
def event(seq, kind, attempt, worker=b"", record=b"", step_index=0, step=b"", code=b"", reason=b""):
    return msg(EVENT, u64(seq), u64(1730000000000 + seq), u8(kind), text(JOB_ID), u32(attempt),
               text("photos/IMG_0001.jpg"), worker, record, i32(step_index), step, code, reason)


vector("event-accepted", "events", "EVENT accepted (seq 1001), published with topic 'ev'",
       [TOPIC] + event(1001, 1, 0),
       {"command": "EVENT", "seq": 1001, "time": 1730000001001, "kind": "accepted", "jobID": JOB_ID, "attempt": 0,
        "sourceName": "photos/IMG_0001.jpg", "workerID": "", "recordID": "nil", "failure": "nil"})
vector("event-started", "events", "EVENT started on a worker",
       [TOPIC] + event(1002, 2, 1, worker=b"w-01JBX3"), {"kind": "started", "attempt": 1, "workerID": "w-01JBX3"})
vector("event-stored", "events", "EVENT stored with the record id",
       [TOPIC] + event(1003, 3, 1, worker=b"w-01JBX3", record=text(RECORD_ID)),
       {"kind": "stored", "recordID": RECORD_ID, "failure": "nil"})
vector("event-failed", "events", "EVENT failed in step 1 (the first step)",
       [TOPIC] + event(1004, 5, 1, worker=b"w-01JBX3", step_index=1, step=b"crop:600x600+0+0",
                       code=b"image.invalid-argument", reason=b"rectangle exceeds image 500x400"),
       {"kind": "failed", "failure.stepIndex": 1, "failure.step": "crop:600x600+0+0",
        "failure.code": "image.invalid-argument"})
vector("event-retrying", "events", "EVENT retrying: the worker was lost, attempt 2 next",
       [TOPIC] + event(1005, 4, 2, code=b"worker.lost", reason=b"retry in 1.6 s"),
       {"kind": "retrying", "attempt": 2, "failure.stepIndex": 0, "failure.code": "worker.lost"})
vector("event-dead", "events", "EVENT dead", [TOPIC] + event(1006, 6, 1, code=b"image.corrupt", reason=b"bad Huffman code"),
       {"kind": "dead", "failure.code": "image.corrupt"})
vector("event-replayed", "frontend", "EVENT sent on the frontend in answer to REPLAY (no topic frame)",
       event(1007, 8, 1), {"command": "EVENT", "seq": 1007, "kind": "discarded"})
vector("event-cancelled", "events", "EVENT cancelled: the worker stopped attempt 1",
       [TOPIC] + event(1011, 9, 1, worker=b"w-01JBX3"), {"kind": "cancelled", "attempt": 1, "workerID": "w-01JBX3"})
vector("event-cancelled-expired", "events", "EVENT cancelled: the job's deadline passed while it waited (failure job.expired)",
       [TOPIC] + event(1012, 9, 0, code=b"job.expired", reason=b"not started by its deadline, 2026-01-01T01:00:00.000Z"),
       {"kind": "cancelled", "attempt": 0, "workerID": "", "failure.stepIndex": 0, "failure.code": "job.expired"})
vector("event-worker-id", "events", "EVENT retrying after the worker was lost: no worker id (the event concerns no worker)",
       [TOPIC] + event(1010, 4, 3, code=b"worker.lost", reason=b"attempt 3 now: worker w-01JBX3 stopped answering"),
       {"kind": "retrying", "attempt": 3, "workerID": ""})


def record(message):
    """One EVENTS record: the fields of an EVENT message (frames 2-13), each as u16 length + bytes."""
    return b"".join(u16(len(f)) + f for f in message[2:])


def events(*messages, count=None):
    return msg(EVENTS, u32(len(messages) if count is None else count), b"".join(record(m) for m in messages))


vector("events-batch", "events", "EVENTS: one job's accepted, started and stored in one message, topic 'eb'",
       [BATCH_TOPIC] + events(event(1001, 1, 0), event(1002, 2, 1, worker=b"w-01JBX3"),
                              event(1003, 3, 1, worker=b"w-01JBX3", record=text(RECORD_ID))),
       {"command": "EVENTS", "count": 3, "events.0.seq": 1001, "events.0.kind": "accepted", "events.0.attempt": 0,
        "events.1.kind": "started", "events.1.workerID": "w-01JBX3", "events.2.seq": 1003, "events.2.kind": "stored",
        "events.2.recordID": RECORD_ID, "events.2.failure": "nil"})
vector("events-failure", "events", "EVENTS with one event: failed in step 1, then dead",
       [BATCH_TOPIC] + events(event(1004, 5, 1, worker=b"w-01JBX3", step_index=1, step=b"crop:600x600+0+0",
                                    code=b"image.invalid-argument", reason=b"rectangle exceeds image 500x400"),
                              event(1005, 6, 1, code=b"image.invalid-argument", reason=b"rectangle exceeds image 500x400")),
       {"command": "EVENTS", "count": 2, "events.0.kind": "failed", "events.0.failure.stepIndex": 1,
        "events.0.failure.step": "crop:600x600+0+0", "events.1.kind": "dead",
        "events.1.failure.code": "image.invalid-argument"})

# ---------------------------------------------------------------- malformed
bad("bad-version", "frontend", "frame 0 is DRK2", [b"DRK2", u8(PING), u64(1)], 100, "expected protocol DRK1, got 'DRK2'")
bad("mdp-client", "frontend", "an MDP client talking to the broker",
    [b"MDPC02", u8(1), b"echo", b"hello"], 100, "expected protocol DRK1, got 'MDPC02'")
bad("empty-message", "frontend", "no frames", [], 101, "message has 0 frame(s); a DRK1 message has at least 2")
bad("no-command", "frontend", "protocol id only", [DRK1], 101, "message has 1 frame(s); a DRK1 message has at least 2")
bad("long-command", "frontend", "command frame of 2 bytes", [DRK1, b"\x10\x00"], 101,
    "frame 1 (command) must be 1 byte, got 2")
bad("unknown-command", "frontend", "command 0x7f", [DRK1, u8(0x7F)], 102, "unknown command 0x7f")
bad("wrong-socket", "frontend", "a backend command on the frontend", msg(CREDIT, u32(1)), 103,
    "CREDIT is not valid on the frontend")
bad("submit-short", "frontend", "SUBMIT without its image frame",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg")), 101,
    "SUBMIT: expected 8 to 13 frames, got 7")
bad("submit-key-space", "frontend", "SUBMIT whose submit key has a space",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, text("two words")), 101,
    "SUBMIT: frame 8 (submit key) must be printable ASCII without spaces")
bad("submit-priority", "frontend", "SUBMIT with priority 10",
    msg(SUBMIT, u64(42), u8(10), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 3 (priority) is 10, must be 0…9")
bad("submit-utf8", "frontend", "SUBMIT whose pipeline is not UTF-8",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), b"scale:\xff\xfe", text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 5 (pipeline) is not valid UTF-8")
bad("submit-bom", "frontend", "SUBMIT whose source name starts with a byte-order mark",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), "\ufeffa.jpg".encode("utf-8"), IMAGE), 101,
    "SUBMIT: frame 6 (source name) starts with a byte-order mark (U+FEFF)")
bad("bad-version-error-byte", "frontend", "frame 0 is DRK2 and frame 1 is 0x01: answered bad-version like any other message",
    [b"DRK2", u8(ERROR), u64(0), u16(101), text("x")], 100, "expected protocol DRK1, got 'DRK2'")
bad("submit-newline", "frontend", "SUBMIT whose pipeline spans two lines",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), b"grayscale\ninvert", text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 5 (pipeline) contains control character U+000A")
bad("submit-quality", "frontend", "SUBMIT with quality 0",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 0, 70), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 4 (options) quality is 0, must be 1…100")
bad("submit-options-length", "frontend", "SUBMIT with a 6-byte options frame",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70)[:6], text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 4 (options) must be 8 bytes, got 6")
bad("submit-undefined-flag", "frontend", "SUBMIT whose output flags set bit 7, which is not defined",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70, 0x80), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 4 (options) output flags are 128: bit 7 is not defined")
bad("job-undefined-flag-bit", "backend", "JOB whose output flags set bit 7 beside AVIF formats",
    msg(JOB, text(JOB_ID), u32(1), options(256, 256, 95, 70, 0x80 | AVIF | THUMB_AVIF), text("grayscale"), text("a.jpg"), IMAGE), 101,
    "JOB: frame 4 (options) output flags are 248: bit 7 is not defined")
bad("submit-thumbnail-gravity", "frontend", "SUBMIT whose thumbnail gravity is 10 (0-9 are defined)",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70, 0, 10), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 4 (options) thumbnail gravity is 10, must be 0…9")
bad("submit-empty-image", "frontend", "SUBMIT with an empty image",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), b""), 101,
    "SUBMIT: frame 7 (image) is empty")
bad("submit-short-request-id", "frontend", "SUBMIT with a 4-byte request id",
    msg(SUBMIT, u32(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 2 (request id) must be 8 bytes, got 4")
bad("accepted-lowercase-id", "frontend", "ACCEPTED with a lower-case job id",
    msg(ACCEPTED, u64(42), text(JOB_ID.lower()), u64(1)), 101,
    "ACCEPTED: frame 3 (job id) is not a ULID (26 characters of Crockford base32), got '01jbx3z7q8m4n6p2…'")
bad("accepted-overflow-id", "frontend", "ACCEPTED with a ULID over 128 bits (first character 8)",
    msg(ACCEPTED, u64(42), text("8" + JOB_ID[1:]), u64(1)), 101,
    "ACCEPTED: frame 3 (job id) is not a ULID (26 characters of Crockford base32), got '81JBX3Z7Q8M4N6P2…'")
bad("dead-retry-target", "frontend", "DEAD-RETRY with target 'everything'",
    msg(DEAD_RETRY, u64(6), text("everything")), 101,
    "DEAD-RETRY: frame 3 (target) must be \"all\" or a job id, got 'everything'")
bad("job-info-bad-id", "frontend", "JOB-INFO with a job id that is not a ULID",
    msg(JOB_INFO, u64(9), text("job-42")), 101,
    "JOB-INFO: frame 3 (job id) is not a ULID (26 characters of Crockford base32), got 'job-42'")
bad("pause-frames", "frontend", "PAUSE with a frame too many", msg(PAUSE, u64(12), u8(1)), 101,
    "PAUSE: expected 3 frames, got 4")
bad("resume-to-client", "frontend", "RESUME sent to a client: only the broker reads it",
    msg(RESUME, u64(13)), 103, "RESUME is not sent to a client", receiver="peer")
bad("job-list-state", "frontend", "JOB-LIST of a state that is not listed", msg(JOB_LIST, u64(14), text("stored"), u32(0), u32(20)),
    101, "JOB-LIST: frame 3 (state) must be queued, delayed or running, got 'stored'")
bad("job-list-cursor-state", "frontend", "JOB-LIST of the running jobs after a queued job's cursor",
    msg(JOB_LIST, u64(14), text("running"), u32(0), u32(20), text("5-" + JOB_ID)), 101,
    "JOB-LIST: frame 6 (after) is not a place among the running jobs: '5-" + JOB_ID + "'")
bad("job-list-cursor-priority", "frontend", "JOB-LIST after a queued cursor of priority 10",
    msg(JOB_LIST, u64(14), text("queued"), u32(0), u32(20), text("10-" + JOB_ID)), 101,
    "JOB-LIST: frame 6 (after) is not a place among the queued jobs: '10-" + JOB_ID + "'")
bad("job-list-limit-zero", "frontend", "JOB-LIST with limit 0", msg(JOB_LIST, u64(14), text("running"), u32(0), u32(0)),
    101, "JOB-LIST: frame 5 (limit) is 0, must be 1…1000")
bad("job-info-frames", "frontend", "JOB-INFO without its job id", msg(JOB_INFO, u64(9)), 101,
    "JOB-INFO: expected 4 frames, got 3")
bad("dead-list-limit", "frontend", "DEAD-LIST with limit 0", msg(DEAD_LIST, u64(4), u32(0), b""), 101,
    "DEAD-LIST: frame 3 (limit) is 0, must be 1…1000")
bad("ready-slots", "backend", "READY with 0 slots",
    msg(READY, text("w1"), text("node-a"), u32(1), u32(0)), 101, "READY: frame 5 (slots) is 0, must be 1…4096")
bad("ready-worker-id", "backend", "READY with a space in the worker id",
    msg(READY, text("w 1"), text("node-a"), u32(1), u32(2)), 101,
    "READY: frame 2 (worker id) must be printable ASCII without spaces")
bad("credit-zero", "backend", "CREDIT 0", msg(CREDIT, u32(0)), 101, "CREDIT: frame 2 (count) is 0, must be 1…4294967295")
bad("job-attempt-zero", "backend", "JOB with attempt 0",
    msg(JOB, text(JOB_ID), u32(0), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "JOB: frame 3 (attempt) is 0, must be 1…4294967295")
bad("fail-retryable", "backend", "FAIL with retryable = 2",
    msg(FAIL, text(JOB_ID), u32(1), u8(2), i32(0), b"", text("internal"), b""), 101,
    "FAIL: frame 4 (retryable) is 2, must be 0…1")
bad("fail-step-index", "backend", "FAIL with step index -1 (steps count from 1; 0 is 'not in a step')",
    msg(FAIL, text(JOB_ID), u32(1), u8(0), i32(-1), b"", text("internal"), b""), 101,
    "FAIL: frame 5 (step index) is -1, must be 0…2147483647")
bad("event-step-index", "events", "EVENT with step index -1",
    [TOPIC] + event(1, 5, 1, step_index=-1, code=b"internal"), 101,
    "EVENT: frame 11 (step index) is -1, must be 0…2147483647")
bad("fail-no-code", "backend", "FAIL with an empty error code",
    msg(FAIL, text(JOB_ID), u32(1), u8(0), i32(0), b"", b"", b""), 101, "FAIL: frame 7 (error code) is empty")
bad("heartbeat-extra", "backend", "HEARTBEAT with an extra frame", msg(HEARTBEAT, b""), 101,
    "HEARTBEAT: expected 2 frames, got 3")
bad("holding-length", "backend", "HOLDING whose frame 2 is one byte over a whole entry",
    msg(HOLDING, held((JOB_ID, 1)) + b"\x00"), 101,
    "HOLDING: frame 2 (held jobs) is 31 bytes, must be a multiple of 30")
bad("holding-attempt-zero", "backend", "HOLDING with attempt 0 for its second job",
    msg(HOLDING, held((JOB_ID, 1), (JOB_ID_2, 0))), 101,
    "HOLDING: frame 2 (held jobs) job 2 of 2: attempt is 0, must be 1…4294967295")
bad("holding-duplicate", "backend", "HOLDING that lists one job twice, at two attempts",
    msg(HOLDING, held((JOB_ID, 1), (JOB_ID_2, 1), (JOB_ID, 2))), 101,
    "HOLDING: frame 2 (held jobs) job 3 of 3: job " + JOB_ID + " is listed twice")
bad("holding-lowercase-id", "backend", "HOLDING with a lower-case job id",
    msg(HOLDING, held((JOB_ID.lower(), 1))), 101,
    "HOLDING: frame 2 (held jobs) job 1 of 1: job id is not a ULID (26 characters of Crockford base32), "
    "got '01jbx3z7q8m4n6p2…'")
bad("holding-too-many", "backend", "HOLDING with 4097 jobs (at most 4096, one per slot)",
    msg(HOLDING, held(*[("01JBX3Z7Q8M4N6P2R5T9V%05d" % n, 1) for n in range(4097)])), 101,
    "HOLDING: frame 2 (held jobs) holds 4097 jobs, must be at most 4096")
bad("holding-frames", "backend", "HOLDING without its held-jobs frame", msg(HOLDING), 101,
    "HOLDING: expected 3 frames, got 2")
bad("store-size", "store", "STORE with a zero width",
    msg(STORE, u64(1), text(JOB_ID), text("a.jpg"), text(PIPELINE), size(0, 10), size(10, 10), IMAGE, THUMB), 101,
    "STORE: frame 6 (full size) is 0x10, each side must be 1…65535")
bad("get-variant", "store", "GET with variant 2", msg(GET, u64(1), text(JOB_ID), u8(2)), 101,
    "GET: frame 4 (variant) is 2, must be 0…1")
bad("list-reply-json", "store", "LIST-REPLY whose JSON is an object, not an array",
    msg(LIST_REPLY, u64(1), b'{"id":1}'), 101, None)
bad("event-topic", "events", "EVENT published without its topic frame", event(1, 1, 0), 101,
    "frame 0 (topic) must be 'ev' or 'eb', got 'DRK1'")
bad("event-kind", "events", "EVENT with kind 10", [TOPIC] + event(1, 10, 0), 101,
    "EVENT: frame 5 (kind) is 10, must be 1…9")
bad("event-unknown-topic", "events", "an EVENT under the topic 'ex'", [b"ex"] + event(1, 1, 0), 101,
    "frame 0 (topic) must be 'ev' or 'eb', got 'ex'")
bad("events-under-ev", "events", "EVENTS under the topic 'ev'", [TOPIC] + events(event(1, 1, 0)), 103,
    "EVENTS is not valid under the topic 'ev'")
bad("events-zero", "events", "EVENTS with count 0", [BATCH_TOPIC] + msg(EVENTS, u32(0), b"\x00"), 101,
    "EVENTS: frame 3 (count) is 0, must be 1…1000")
bad("events-gap", "events", "EVENTS whose seqs skip one", [BATCH_TOPIC] + events(event(5, 1, 0), event(7, 2, 1)), 101,
    "EVENTS: frame 4 (events) event 2 of 2 has seq 7, must be 6")
bad("events-short", "events", "EVENTS that announces 3 events and holds 2",
    [BATCH_TOPIC] + events(event(5, 1, 0), event(6, 2, 1), count=3), 101,
    "EVENTS: frame 4 (events) ends inside event 3 of 3")
bad("events-trailing", "events", "EVENTS that announces 1 event and holds 2",
    [BATCH_TOPIC] + events(event(5, 1, 0), event(6, 2, 1), count=1), 101,
    "EVENTS: frame 4 (events) has %d byte(s) after its 1 event(s)" % len(record(event(6, 2, 1))))
bad("events-bad-event", "events", "EVENTS holding an event of kind 10", [BATCH_TOPIC] + events(event(5, 10, 0)), 101,
    "EVENTS: frame 4 (events) event 1 of 1: EVENT: frame 4 (kind) is 10, must be 1…9")
bad("cancel-target", "frontend", "CANCEL with a target that is neither 'queued' nor a job id",
    msg(CANCEL, u64(10), text("everything")), 101,
    "CANCEL: frame 3 (target) must be \"queued\" or a job id, got 'everything'")
bad("cancel-job-to-broker", "backend", "CANCEL-JOB sent to the broker: only the broker sends it",
    msg(CANCEL_JOB, text(JOB_ID), u32(1)), 103, "CANCEL-JOB is not sent to the broker", receiver="server")

# ---------------------------------------------------------------- order of checks (section 3.2)
bad("bad-version-one-frame", "frontend", "one frame, not DRK1: bad-version before the frame count",
    [b"DRK2"], 100, "expected protocol DRK1, got 'DRK2'")
bad("bad-version-unknown-command", "frontend", "frame 0 is DRK2 and the command is unknown: bad-version first",
    [b"DRK2", u8(0x7F), u64(5)], 100, "expected protocol DRK1, got 'DRK2'")
bad("long-unknown-command", "frontend", "a 2-byte command frame that no command could be: malformed",
    [DRK1, b"\x7f\x00", u64(5)], 101, "frame 1 (command) must be 1 byte, got 2")
bad("unknown-command-request-id", "frontend", "an unknown command with an 8-byte frame 2: answered with request id 0",
    [DRK1, u8(0x7F), u64(5)], 102, "unknown command 0x7f")
bad("wrong-socket-bad-fields", "frontend", "CREDIT 0 on the frontend: the socket is checked before the fields",
    msg(CREDIT, u32(0)), 103, "CREDIT is not valid on the frontend")
bad("wrong-socket-frame-count", "frontend", "DONE with one frame on the frontend: the socket is checked before the frame count",
    msg(DONE, text(JOB_ID)), 103, "DONE is not valid on the frontend")
bad("wrong-socket-request-id", "frontend", "a store request on the frontend: its request id is echoed",
    msg(GET, u64(77), text(JOB_ID), u8(0)), 103, "GET is not valid on the frontend")
bad("wrong-direction-frontend", "frontend",
    "ACCEPTED sent to the broker, with a lower-case job id: the direction is checked before the fields",
    msg(ACCEPTED, u64(42), text(JOB_ID.lower()), u64(1)), 103, "ACCEPTED is not sent to the broker", receiver="server")
bad("wrong-direction-client", "frontend", "SUBMIT sent to a client (a DEALER that connected to the frontend)",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE), 103,
    "SUBMIT is not sent to a client", receiver="peer")
bad("wrong-direction-backend", "backend", "JOB sent to the broker with one frame missing: the direction is checked before the frame count",
    msg(JOB, text(JOB_ID), u32(1), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg")), 103,
    "JOB is not sent to the broker", receiver="server")
bad("wrong-direction-worker", "backend", "READY sent to a worker",
    msg(READY, text("w-01JBX3"), text("node-a"), u32(4242), u32(2)), 103, "READY is not sent to a worker",
    receiver="peer")
bad("wrong-direction-store", "store", "STORED sent to the storage node",
    msg(STORED, u64(10), text(JOB_ID), text(RECORD_ID), u8(1)), 103, "STORED is not sent to the storage node",
    receiver="server")
bad("frame-count-before-fields", "frontend", "SUBMIT with 7 frames and priority 10: the frame count is checked first",
    msg(SUBMIT, u64(42), u8(10), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg")), 101,
    "SUBMIT: expected 8 to 13 frames, got 7")
bad("submit-fourteen-frames", "frontend", "SUBMIT with a frame after its time limit",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, text(JOB_ID_2), u64(1), u16(3), u64(9),
        u32(60), b""),
    101, "SUBMIT: expected 8 to 13 frames, got 14")
bad("submit-time-limit-zero", "frontend", "SUBMIT whose time limit is 0",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, b"", u64(0), b"", u64(0), u32(0)),
    101, "SUBMIT: frame 12 (time limit) is 0, must be 1…604800")
bad("job-time-limit-long", "backend", "JOB whose time limit is over a week",
    msg(JOB, text(JOB_ID), u32(1), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, u32(604801)), 101,
    "JOB: frame 8 (time limit) is 604801, must be 1…604800")
bad("job-ten-frames", "backend", "JOB with a frame after its time limit",
    msg(JOB, text(JOB_ID), u32(1), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, u32(60), b""), 101,
    "JOB: expected 8 or 9 frames, got 10")
bad("submit-empty-attempts", "frontend", "SUBMIT with an empty attempts frame and no deadline after it",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, b"", u64(0), b""),
    101, "SUBMIT: frame 10 (attempts) must be 2 bytes, got 0")
bad("submit-short-expires", "frontend", "SUBMIT whose deadline frame is 4 bytes",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, b"", u64(0), u16(2), u32(9)),
    101, "SUBMIT: frame 11 (expires) must be 8 bytes, got 4")
bad("submit-attempts-zero", "frontend", "SUBMIT whose attempts frame is 0",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, b"", u64(0), u16(0)),
    101, "SUBMIT: frame 10 (attempts) is 0, must be 1…1000")
bad("submit-attempts-over", "frontend", "SUBMIT whose attempts frame is 1001",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, b"", u64(0), u16(1001)),
    101, "SUBMIT: frame 10 (attempts) is 1001, must be 1…1000")
bad("submit-empty-not-before", "frontend", "SUBMIT whose frame after its submit key is empty (not a not-before time)",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, text(JOB_ID_2), b""),
    101, "SUBMIT: frame 9 (not before) must be 8 bytes, got 0")
bad("submit-empty-key", "frontend", "SUBMIT with an empty submit key and no frame after it",
    msg(SUBMIT, u64(42), u8(5), options(256, 256, 95, 70), text(PIPELINE), text("a.jpg"), IMAGE, b""),
    101, "SUBMIT: frame 8 (submit key) is empty")
bad("status-short-request-id", "frontend", "STATUS with a 4-byte request id: the ERROR carries request id 0",
    msg(STATUS, u32(2)), 101, "STATUS: frame 2 (request id) must be 8 bytes, got 4")
bad("first-bad-field", "frontend", "SUBMIT with priority 10 and quality 0: the first bad field is reported",
    msg(SUBMIT, u64(42), u8(10), options(256, 256, 0, 70), text(PIPELINE), text("a.jpg"), IMAGE), 101,
    "SUBMIT: frame 3 (priority) is 10, must be 0…9")

# ---------------------------------------------------------------- worker ids (section 8)
bad("event-worker-id-space", "events", "EVENT whose worker id has a space (worker ids are as in READY)",
    [TOPIC] + event(1002, 2, 1, worker=b"w 1"), 101,
    "EVENT: frame 9 (worker id) must be printable ASCII without spaces")
bad("event-worker-id-utf8", "events", "EVENT whose worker id is not ASCII",
    [TOPIC] + event(1002, 2, 1, worker="wé".encode("utf-8")), 101,
    "EVENT: frame 9 (worker id) must be printable ASCII without spaces")
bad("ready-worker-id-long", "backend", "READY with a 65-byte worker id",
    msg(READY, text("w" * 65), text("node-a"), u32(1), u32(2)), 101, "READY: frame 2 (worker id) is 65 bytes, must be 1…64")
bad("ready-worker-id-empty", "backend", "READY with an empty worker id",
    msg(READY, b"", text("node-a"), u32(1), u32(2)), 101, "READY: frame 2 (worker id) is empty")

out = {
    "protocol": "DRK1",
    "comment": "Generated by generate.py from drk1.md. Frames are hex; 'fields' are decoded values "
               "(text form; 'nil' = absent). Malformed vectors must be rejected with 'code' and answered by an ERROR "
               "with 'requestID'. Their 'reason', when given, is the darkroom implementation's text, which its own "
               "tests check exactly; another implementation may word its reasons differently (drk1.md sections 9.2 "
               "and 14). 'receiver' is the end of the socket that "
               "reads the message ('server': the broker or the storage node; 'peer': a client or worker); "
               "'wrongDirection' marks a message bad only because that end reads it. Frame indexes in reasons "
               "count from the first frame listed.",
    "vectors": vectors,
    "malformed": malformed,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "drk1.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(f"wrote {len(vectors)} vectors and {len(malformed)} malformed vectors to {path}")
