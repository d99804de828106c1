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

On SIGTERM or SIGINT it prints one JSON line to stderr: connections, bytes
each way, and the largest number of bytes held in one direction.
"""
import argparse
import asyncio
import json
import signal
import socket
import sys


def host_port(text):
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


class Stats:
    def __init__(self):
        self.connections = 0
        self.up = 0      # listener side -> target
        self.down = 0    # target -> listener side
        self.max_held = 0


async def pump(reader, writer, delay, max_buffer, stats, direction):
    """Reads from reader, writes each chunk to writer `delay` seconds later."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    held = 0
    room = asyncio.Event()
    room.set()

    async def deliver():
        nonlocal held
        try:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    break
                writer.write(data)
                await writer.drain()
                held -= len(data)
                if held < max_buffer:
                    room.set()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            await room.wait()
            data = await reader.read(1 << 18)
            if not data:
                break
            if direction == "up":
                stats.up += len(data)
            else:
                stats.down += len(data)
            held += len(data)
            stats.max_held = max(stats.max_held, held)
            if held >= max_buffer:
                room.clear()
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    finally:
        queue.put_nowait((loop.time() + delay, None))
        await sender


async def handle(client_reader, client_writer, target, delay, max_buffer, stats):
    stats.connections += 1
    try:
        target_reader, target_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.close()
        return
    for w in (client_writer, target_writer):
        sock = w.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await asyncio.gather(
        pump(client_reader, target_writer, delay, max_buffer, stats, "up"),
        pump(target_reader, client_writer, delay, max_buffer, stats, "down"),
    )


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to accept on")
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--delay-ms", type=float, default=50.0, help="delay per direction (default 50: +100 ms per round trip)")
    ap.add_argument("--max-buffer", type=int, default=64 << 20, help="bytes held per direction before reading pauses")
    args = ap.parse_args()

    stats = Stats()
    target = host_port(args.target)
    delay = args.delay_ms / 1000.0
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, target, delay, args.max_buffer, stats),
        *host_port(args.listen), reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"latency_proxy: {args.listen} -> {args.target}, +{args.delay_ms:g} ms each way", file=sys.stderr, flush=True)
    async with server:
        await stop.wait()
    print(json.dumps({"listen": args.listen, "target": args.target, "delayMs": args.delay_ms,
                      "connections": stats.connections, "bytesUp": stats.up, "bytesDown": stats.down,
                      "maxHeldBytes": stats.max_held}), file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
