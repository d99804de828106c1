#!/usr/bin/env python3
"""A TCP forwarder that adds a fixed delay in each direction.

bench/system.sh puts one in front of the broker's backend and one in front
of the storage node, and points remote-style workers at them, to see what a
link with a longer round trip costs (the kernel here has no netem).

    latency_proxy.py --listen 127.0.0.1:17701 --target 127.0.0.1:7701 --delay-ms 50

Every chunk read from one side is written to the other DELAY ms after it was
read, in order, so a round trip through the proxy gains 2 x DELAY. It is a
pure delay line: bandwidth is not limited (only the bytes held in flight
per direction, --max-buffer, bound its memory), nothing is dropped or
reordered. When either side closes, the other is closed too, and the peer
(ZeroMQ) reconnects through the proxy again.

The bytes never enter this process: each chunk is spliced from the socket
into a pipe, where it waits out its delay, and from the pipe into the other
socket (splice(2)). A real network hop costs the two hosts no CPU; a proxy
on the same machine does, and copying every byte through user space (as an
earlier asyncio version did: 0.33 s of CPU for a 4-second run of photos on
two cores) charged that cost to the system measured. Reads that arrive
within `--coalesce-ms` of a chunk's first byte join it in its pipe, so a
stream of small messages does not take a pipe each; such bytes wait at most
that much less than DELAY.

On SIGTERM or SIGINT it prints one JSON line to stderr: connections, bytes
each way, and the largest number of bytes held in one direction.
"""
import argparse
import collections
import errno
import fcntl
import heapq
import itertools
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time

PIPE_BYTES = 1 << 20  # the most one pipe holds (fs.pipe-max-size allows 1 MiB unprivileged)
SPLICE_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK


def host_port(text):
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


class Stats:
    def __init__(self):
        self.connections = 0
        self.up = 0      # listener side -> target
        self.down = 0    # target -> listener side
        self.max_held = 0


class Pipes:
    """Spare pipes, so that a chunk does not cost two new descriptors."""

    def __init__(self):
        self.spare = []
        self.size = PIPE_BYTES

    def take(self):
        if self.spare:
            return self.spare.pop()
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self.size = fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, self.size)
        except OSError:
            self.size = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
        return r, w

    def give(self, pipe):
        if len(self.spare) < 256:
            self.spare.append(pipe)
        else:
            os.close(pipe[0])
            os.close(pipe[1])


class Chunk:
    __slots__ = ("pipe", "first", "due", "bytes", "full")

    def __init__(self, pipe, now, delay):
        self.pipe = pipe
        self.first = now
        self.due = now + delay
        self.bytes = 0
        # A pipe holds a page reference per slot, however few bytes the
        # page carries: it can be full well short of its size in bytes.
        self.full = False


class Direction:
    """One way of one connection: reads `src` into pipes, writes them to
    `dst` once due."""

    def __init__(self, proxy, conn, src, dst, name):
        self.proxy, self.conn, self.src, self.dst, self.name = proxy, conn, src, dst, name
        self.chunks = collections.deque()
        self.held = 0
        self.reading = False
        self.writing = False
        self.eof = False
        self.timer = None

    def readable(self):
        proxy = self.proxy
        now = time.monotonic()
        while self.held < proxy.max_buffer:
            last = self.chunks[-1] if self.chunks else None
            if last is None or last.full or now - last.first > proxy.coalesce or last.bytes >= proxy.pipes.size or last is self.sending():
                last = Chunk(proxy.pipes.take(), now, proxy.delay)
                self.chunks.append(last)
            room = proxy.pipes.size - last.bytes
            try:
                n = os.splice(self.src.fileno(), last.pipe[1], room, flags=SPLICE_FLAGS)
            except BlockingIOError:
                # Either the socket has nothing to read or the pipe has no
                # free slot: an empty pipe tells which.
                if last.bytes == 0:
                    break
                last.full = True
                continue
            except OSError:
                n = 0
            if n == 0:
                self.eof = True
                break
            last.bytes += n
            last.due = now + proxy.delay  # the newest byte waits the full delay
            self.held += n
            if self.name == "up":
                proxy.stats.up += n
            else:
                proxy.stats.down += n
            proxy.stats.max_held = max(proxy.stats.max_held, self.held)
        if self.chunks and not self.chunks[-1].bytes:
            proxy.pipes.give(self.chunks.pop().pipe)
        self.set_reading(not self.eof and self.held < proxy.max_buffer)
        self.schedule()
        if self.eof and not self.chunks:
            self.conn.close()

    def sending(self):
        """The chunk being written out, which no read may add to."""
        return self.chunks[0] if self.writing or (self.chunks and self.chunks[0].due <= time.monotonic()) else None

    def schedule(self):
        if self.writing or self.timer is not None or not self.chunks:
            return
        self.timer = self.proxy.call_at(self.chunks[0].due, self.due)

    def due(self):
        self.timer = None
        self.writable()

    def writable(self):
        proxy = self.proxy
        now = time.monotonic()
        while self.chunks and self.chunks[0].due <= now:
            chunk = self.chunks[0]
            try:
                n = os.splice(chunk.pipe[0], self.dst.fileno(), chunk.bytes, flags=SPLICE_FLAGS)
            except BlockingIOError:
                self.set_writing(True)
                return
            except OSError:
                self.conn.close()
                return
            chunk.bytes -= n
            self.held -= n
            if chunk.bytes == 0:
                self.chunks.popleft()
                proxy.pipes.give(chunk.pipe)
        self.set_writing(False)
        if self.eof and not self.chunks:
            self.conn.close()
            return
        if not self.eof and self.held < proxy.max_buffer:
            self.set_reading(True)
        self.schedule()

    def set_reading(self, on):
        if on != self.reading:
            self.reading = on
            self.conn.update(self.src)

    def set_writing(self, on):
        if on != self.writing:
            self.writing = on
            self.conn.update(self.dst)

    def release(self):
        for chunk in self.chunks:
            os.close(chunk.pipe[0])
            os.close(chunk.pipe[1])
        self.chunks.clear()
        if self.timer is not None:
            self.timer.cancelled = True


class Connection:
    def __init__(self, proxy, client, target):
        self.proxy, self.client, self.target = proxy, client, target
        self.closed = False
        self.up = Direction(proxy, self, client, target, "up")
        self.down = Direction(proxy, self, target, client, "down")
        self.registered = {}
        self.up.set_reading(True)
        self.down.set_reading(True)

    def update(self, sock):
        if self.closed:
            return
        events = 0
        for d in (self.up, self.down):
            if d.src is sock and d.reading:
                events |= selectors.EVENT_READ
            if d.dst is sock and d.writing:
                events |= selectors.EVENT_WRITE
        sel = self.proxy.selector
        if sock in self.registered:
            if events:
                sel.modify(sock, events, self)
            else:
                sel.unregister(sock)
                del self.registered[sock]
        elif events:
            sel.register(sock, events, self)
            self.registered[sock] = True

    def ready(self, sock, mask):
        for d in (self.up, self.down):
            if self.closed:
                return
            if mask & selectors.EVENT_READ and d.src is sock and d.reading:
                d.readable()
            if self.closed:
                return
            if mask & selectors.EVENT_WRITE and d.dst is sock and d.writing:
                d.writable()

    def close(self):
        if self.closed:
            return
        self.closed = True
        for sock in list(self.registered):
            self.proxy.selector.unregister(sock)
        self.registered.clear()
        self.up.release()
        self.down.release()
        self.client.close()
        self.target.close()


class Stop(Exception):
    pass


class Timer:
    __slots__ = ("cancelled",)

    def __init__(self):
        self.cancelled = False


class Proxy:
    def __init__(self, args):
        self.target = host_port(args.target)
        self.delay = args.delay_ms / 1000.0
        self.coalesce = args.coalesce_ms / 1000.0
        self.max_buffer = args.max_buffer
        self.stats = Stats()
        self.pipes = Pipes()
        self.selector = selectors.DefaultSelector()
        self.timers = []
        self.order = itertools.count()
        self.listener = socket.create_server(host_port(args.listen), reuse_port=False)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)

    def call_at(self, when, fn):
        timer = Timer()
        heapq.heappush(self.timers, (when, next(self.order), timer, fn))
        return timer

    def accept(self):
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        self.stats.connections += 1
        try:
            target = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        for sock in (client, target):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Connection(self, client, target)

    def run(self):
        while True:
            timeout = None
            if self.timers:
                timeout = max(0.0, self.timers[0][0] - time.monotonic())
            for key, mask in self.selector.select(timeout):
                if key.data is None:
                    self.accept()
                else:
                    key.data.ready(key.fileobj, mask)
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                _, _, timer, fn = heapq.heappop(self.timers)
                if not timer.cancelled:
                    fn()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to accept on")
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--delay-ms", type=float, default=50.0, help="delay per direction (default 50: +100 ms per round trip)")
    ap.add_argument("--max-buffer", type=int, default=64 << 20, help="bytes held per direction before reading pauses")
    ap.add_argument("--coalesce-ms", type=float, default=1.0, help="reads this close to a chunk's first byte join it (default 1)")
    args = ap.parse_args()

    # Each chunk in flight holds a pipe (two descriptors).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    proxy = Proxy(args)

    def stop(*_):
        # Raised, not flagged: select() would retry after the handler and
        # wait on, with no timer due.
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"latency_proxy: {args.listen} -> {args.target}, +{args.delay_ms:g} ms each way", file=sys.stderr, flush=True)
    try:
        proxy.run()
    except Stop:
        pass
    print(json.dumps({"listen": args.listen, "target": args.target, "delayMs": args.delay_ms,
                      "connections": proxy.stats.connections, "bytesUp": proxy.stats.up, "bytesDown": proxy.stats.down,
                      "maxHeldBytes": proxy.stats.max_held}), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
