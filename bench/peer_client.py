"""A minimal peer recorder for `just bench-fidelity`: an aiohttp streaming client written the
way the common serving benchmarks write theirs (vLLM's `benchmark_serving` backend request
functions): stamp the clock before `session.post`, then stamp every non-empty line of the
response body as it is iterated and parse its JSON.

It drives the same request bodies anvil-capture sent, closed loop, CONCURRENCY at a time,
each with `x-request-id: peer-<index>` so the simulator's truth file can be joined, and writes
one CSV row per SSE event (`id,seq,t_ns,content`) and per request (`id,-1,t_sent_ns,`), all on
CLOCK_MONOTONIC (the clock anvil and anvil-sim use).

Usage: peer_client.py URL CONCURRENCY BODIES.jsonl OUT.csv
"""

import asyncio
import json
import sys
import time

import aiohttp


async def one(session, url, rid, body, rows):
    headers = {
        "x-request-id": rid,
        "accept": "text/event-stream",
        "content-type": "application/json",
    }
    t_sent = time.monotonic_ns()
    seq = 0
    async with session.post(url, data=body, headers=headers) as resp:
        async for line in resp.content:
            t = time.monotonic_ns()
            line = line.strip()
            if not line:
                continue
            data = line.decode("utf-8").removeprefix("data: ")
            content = ""
            if data != "[DONE]":
                chunk = json.loads(data)
                choices = chunk.get("choices") or [{}]
                content = (choices[0].get("delta") or {}).get("content") or ""
            rows.append(f"{rid},{seq},{t},{1 if content else 0}")
            seq += 1
    rows.append(f"{rid},-1,{t_sent},")


async def main():
    url, concurrency, bodies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(bodies) as f:
        work = [json.loads(line) for line in f if line.strip()]
    queue = asyncio.Queue()
    for w in work:
        queue.put_nowait(w)
    rows = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=6 * 3600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker():
            while not queue.empty():
                w = queue.get_nowait()
                await one(session, url, w["id"], w["body"], rows)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    with open(out, "w") as f:
        f.write("\n".join(rows))
        f.write("\n")


if __name__ == "__main__":
    asyncio.run(main())
