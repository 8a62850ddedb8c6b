"""The cocotb test of the op bank (run by :func:`fuseflow.hw.op_bench.run_op_bank`; not a pytest module).

Reads the job named by ``$FUSEFLOW_OPBANK_JOB``: per case its port prefix, input tokens, and port widths. After a
synchronous reset, every input port of every case gets a source and every output port a sink, all at once: before
each token a source holds ``valid`` low (a sink ``ready`` low) for 1..``max_stall`` cycles with probability
``stall``, from the job's seed. A sink stops after ``D``; a writer's memories are read back through their read
ports once its ``done`` rises. The result file maps each case to its decoded tokens (and written words).

Timing: inputs change just after a falling clock edge; ``valid``/``ready`` seen 1 ns later decide whether the
transfer happens at the next rising edge (the bank's ports are FIFO ends: their ``ready``/``valid`` depend on FIFO
state only, never combinationally on the bench's own drive).
"""

import json
import os
import random
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from fuseflow.hw.token import decode, decode_value, encode, encode_value

PERIOD_NS = 10


class Timeout(Exception):
    pass


class Bench:
    def __init__(self, dut, max_cycles):
        self.dut = dut
        self.max_cycles = max_cycles
        self.cycle = 0

    def sig(self, name):
        return getattr(self.dut, name)

    async def edge(self):
        """The next falling edge (1 ns after it the bench may look at the design's outputs)."""
        await FallingEdge(self.dut.clk)
        if self.cycle > self.max_cycles:
            raise Timeout(f"no end after {self.max_cycles} cycles")


def stall_fn(rng, p, max_len):
    def nxt():
        if p and rng.random() < p:
            return rng.randint(1, max_len)
        return 0
    return nxt


def _blocks(lay):
    """A port layout's (block shape, value width), or (None, None) for a scalar port."""
    return (lay[3], lay[4]) if len(lay) > 3 else (None, None)


async def source(b, pre, tokens, w, s, stall, block=None, vw=None):
    valid, payload, ready = b.sig(f"{pre}_valid"), b.sig(f"{pre}_payload"), b.sig(f"{pre}_ready")
    for tok in tokens:
        for _ in range(stall()):
            valid.value = 0
            await b.edge()
        valid.value = 1
        payload.value = encode_value(tok, vw, block) if block else encode(tok, w, s)
        while True:
            await Timer(1, unit="ns")
            taken = int(ready.value)
            await b.edge()
            if taken:
                break
    valid.value = 0


async def sink(b, pre, w, s, kind, stall, got, block=None, vw=None):
    valid, payload, ready = b.sig(f"{pre}_valid"), b.sig(f"{pre}_payload"), b.sig(f"{pre}_ready")
    while True:
        for _ in range(stall()):
            ready.value = 0
            await b.edge()
        ready.value = 1
        while True:
            await Timer(1, unit="ns")
            v, raw = int(valid.value), int(payload.value)
            await b.edge()
            if v:
                break
        if block:
            tok = decode_value(raw, vw, block)
            tok = tok if isinstance(tok, str) else tok.tolist()
        else:
            tok = decode(raw, w, s, repsig=(kind == "repsig"))
        got.append(tok)
        if tok == "D":
            ready.value = 0
            return


async def run_case(b, case, rng, stall_p, max_stall, out):
    pre = case["prefix"]
    got = out[case["name"]] = {}
    try:
        tasks = []
        for p, lay in case["inputs_layout"].items():
            w, s = lay[0], lay[1]
            tasks.append(cocotb.start_soon(source(b, f"{pre}_i_{p}", case["inputs"][p], w, s,
                                                  stall_fn(random.Random(rng.randrange(1 << 30)), stall_p,
                                                           max_stall), *_blocks(lay))))
        for p, lay in case["outputs"].items():
            w, s, kind = lay[:3]
            got[p] = []
            tasks.append(cocotb.start_soon(sink(b, f"{pre}_o_{p}", w, s, kind,
                                                stall_fn(random.Random(rng.randrange(1 << 30)), stall_p,
                                                         max_stall), got[p], *_blocks(lay))))
        for t in tasks:
            await t
        if case["writes"]:
            done = b.sig(f"{pre}_done")
            while not int(done.value):
                await b.edge()
            for array, (w, signed) in case["writes"].items():
                n = int(b.sig(f"{pre}_{array}_count").value)
                raddr, rdata = b.sig(f"{pre}_{array}_raddr"), b.sig(f"{pre}_{array}_rdata")
                words = []
                for i in range(n):
                    raddr.value = i
                    await Timer(1, unit="ns")
                    v = int(rdata.value)
                    words.append(v - (1 << w) if signed and v >> (w - 1) else v)
                got[array] = words
    except Timeout as exc:
        got["error"] = str(exc)


@cocotb.test()
async def op_bank(dut):
    with open(os.environ["FUSEFLOW_OPBANK_JOB"]) as f:
        job = json.load(f)
    out = {}
    try:
        Clock(dut.clk, PERIOD_NS, unit="ns").start()
        b = Bench(dut, job["max_cycles"])
        for case in job["cases"]:
            pre = case["prefix"]
            for p in case["inputs"]:
                b.sig(f"{pre}_i_{p}_valid").value = 0
                b.sig(f"{pre}_i_{p}_payload").value = 0
            for p in case["outputs"]:
                b.sig(f"{pre}_o_{p}_ready").value = 0
        dut.rst.value = 1
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0

        async def count():
            while True:
                await FallingEdge(dut.clk)
                b.cycle += 1
        cocotb.start_soon(count())
        rng = random.Random(job["seed"])
        tasks = [cocotb.start_soon(run_case(b, case, random.Random(rng.randrange(1 << 30)), job["stall"],
                                            job["max_stall"], out)) for case in job["cases"]]
        for t in tasks:
            await t
        res = {"cases": out, "cycles": b.cycle}
    except Exception as exc:  # noqa: BLE001 - reported to the caller through the result file
        res = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", "cases": out}
    tmp = job["result"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, job["result"])
