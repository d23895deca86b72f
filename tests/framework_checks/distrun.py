"""Run a function on `world` forked CPU processes joined by a gloo process group.

Each child gets MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK in its environment and calls
fn(rank, world, *args); the return values (picklable) come back as a list by rank. A child that
raises sends back its traceback and the whole run fails with it. The parent process never
initialises torch.distributed, so runs do not disturb each other.
"""

from __future__ import annotations

import os
import socket
import traceback


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, rank, world, port, args, queue):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK="0", LOCAL_SIZE="1")
        import torch
        torch.set_num_threads(1)
        queue.put((rank, True, fn(rank, world, *args)))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn, world: int, *args, timeout: float = 120.0) -> list:
    import torch.multiprocessing as mp

    ctx = mp.get_context("fork")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_child, args=(fn, r, world, port, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results, errors = {}, []
    import time
    deadline = time.monotonic() + timeout
    while len(results) + len(errors) < world and time.monotonic() < deadline:
        if not queue.empty():
            rank, ok, value = queue.get()
            (results.__setitem__(rank, value) if ok else errors.append(f"rank {rank}:\n{value}"))
            continue
        if all(not p.is_alive() for p in procs) and queue.empty():
            break
        time.sleep(0.02)
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
    if errors:
        raise AssertionError("a rank failed:\n" + "\n".join(errors))
    missing = [r for r in range(world) if r not in results]
    if missing:
        raise AssertionError(f"ranks {missing} gave no result within {timeout} s "
                             f"(exit codes {[p.exitcode for p in procs]})")
    return [results[r] for r in range(world)]
