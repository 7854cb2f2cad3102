"""Micro-benchmark of Microsoft autogen-core's SingleThreadedAgentRuntime.

Baseline for comparison with Cohort's runtime. Two scenarios:
  pingpong  - the driver awaits runtime.send_message(Ping(), pong agent); the Pong
              handler returns a Pong reply. Reports round trips/s and p50 latency
              at two sizes (N/4 and N), so you can check the rate stays flat as N grows.
  broadcast - 100 agents subscribed to one topic; the driver publishes M messages
              (fire and forget) and waits until every agent has seen all of them.

Usage: python bench.py [--quick] [--n N] [--m M]
Only the final JSON line goes to stdout; progress goes to stderr.
Dependencies: autogen-core and the standard library (no version pinned on purpose).
"""

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version

from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    message_handler,
    type_subscription,
)

TOPIC = "bench"  # topic type every broadcast listener subscribes to
N_LISTENERS = 100
WARMUP = 500  # round trips before timing: creates the Pong agent lazily, warms caches


def log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


# Messages are plain dataclasses; autogen-core registers a serializer for them at
# registration time (it serializes every message for its event log, even with logging off).
@dataclass
class Ping:
    pass


@dataclass
class Pong:
    pass


@dataclass
class Tick:
    pass


class PongAgent(RoutedAgent):
    # @message_handler routes by the type hint of `message`; the return hint is
    # mandatory and checked at runtime (strict=True by default).
    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Pong:
        return Pong()


# Delivery counter shared by all listeners: the runtime is single-threaded (one
# asyncio loop), so a plain int is safe.
received = 0


# type_subscription maps topic (TOPIC, source) -> AgentId(<registered type>, source).
# One subscription yields ONE recipient per agent type, so to get 100 receivers of a
# single publish we register this class under 100 distinct agent types.
@type_subscription(topic_type=TOPIC)
class Listener(RoutedAgent):
    @message_handler
    async def on_tick(self, message: Tick, ctx: MessageContext) -> None:
        global received
        received += 1


async def pingpong(sizes: list[int]) -> list[dict]:
    rt = SingleThreadedAgentRuntime()
    await PongAgent.register(rt, "pong", lambda: PongAgent("pong"))
    rt.start()
    pong = AgentId("pong", "default")
    for _ in range(WARMUP):
        await rt.send_message(Ping(), pong)
    results = []
    for n in sizes:
        lat = [0] * n
        t0 = time.perf_counter()
        for i in range(n):
            s = time.perf_counter_ns()
            reply = await rt.send_message(Ping(), pong)
            lat[i] = time.perf_counter_ns() - s
        elapsed = time.perf_counter() - t0
        assert isinstance(reply, Pong), reply
        r = {
            "round_trips": n,
            "per_s": round(n / elapsed, 1),
            "p50_us": round(statistics.median(lat) / 1000, 2),
        }
        log("pingpong", r)
        results.append(r)
    await rt.stop_when_idle()
    return results


async def broadcast(m: int) -> dict:
    global received
    rt = SingleThreadedAgentRuntime()
    for i in range(N_LISTENERS):
        await Listener.register(rt, f"listener-{i}", lambda: Listener("listener"))
    rt.start()
    topic = TopicId(TOPIC, "default")
    # Warm-up publish: agents are instantiated lazily on first delivery; keep that
    # one-off cost out of the timing.
    await rt.publish_message(Tick(), topic)
    await rt.stop_when_idle()
    assert received == N_LISTENERS, received
    received = 0

    rt.start()
    t0 = time.perf_counter()
    for _ in range(m):
        await rt.publish_message(Tick(), topic)  # only enqueues: fire and forget
    # Returns once the queue is drained; a publish is marked done only after all of
    # its handlers have finished, so every delivery has happened by then.
    await rt.stop_when_idle()
    elapsed = time.perf_counter() - t0
    # Handler exceptions are swallowed by default (ignore_unhandled_exceptions=True),
    # so check the count explicitly rather than trusting the run.
    if received != m * N_LISTENERS:
        raise RuntimeError(f"expected {m * N_LISTENERS} deliveries, got {received}")
    r = {
        "agents": N_LISTENERS,
        "messages": m,
        "deliveries_per_s": round(m * N_LISTENERS / elapsed, 1),
    }
    log("broadcast", r)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts (N=4000, M=300)")
    ap.add_argument("--n", type=int, help="pingpong round trips (default 20000)")
    ap.add_argument("--m", type=int, help="broadcast messages (default 2000)")
    a = ap.parse_args()
    n = a.n or (4000 if a.quick else 20000)
    m = a.m or (300 if a.quick else 2000)

    out = {
        "autogen_core_version": version("autogen-core"),
        "python": platform.python_version(),
        "pingpong": asyncio.run(pingpong([max(1, n // 4), n])),
        "broadcast": asyncio.run(broadcast(m)),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
