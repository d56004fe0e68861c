"""An OpenAI-compatible chat server on 127.0.0.1 that answers every request after a fixed delay.

Run as a script, it serves until killed and prints `PORT <n>` once it listens. asyncio throughout, with
keep-alive, so hundreds of concurrent requests each wait their delay and no more: what a benchmark measures
is the client side.

    python bench/latency_server.py --delay 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time


def completion(model: str, text: str) -> bytes:
    body = {
        "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    return json.dumps(body).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            raw = await reader.readexactly(length) if length else b""
            try:
                model = str(json.loads(raw).get("model", "bench"))
            except ValueError:
                model = "bench"
            await asyncio.sleep(delay)
            data = completion(model, "ok")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(data)).encode() + b"\r\nConnection: keep-alive\r\n\r\n" + data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def serve(delay: float, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, delay), "127.0.0.1", port, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.1, help="seconds before each answer (default 0.1)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.delay, args.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
