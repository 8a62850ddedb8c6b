"""The coordinate-width rule (fuseflow.samml.widths): one definition for the compiler, the simulator and hw."""

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.errors import GraphError, HardwareError, TensorError
from fuseflow.samml import Program, kernels, save
from fuseflow.samml.widths import (WIDTHS, assign_widths, check_fits_width, data_top, program_width,
                                   tensor_width, width_for)
from fuseflow.tensors.io import save_npz


@pytest.mark.parametrize("top, width", [(0, 16), (65535, 16), (65536, 24), ((1 << 24) - 1, 24), (1 << 24, 32),
                                        ((1 << 32) - 1, 32)])
def test_width_for_picks_the_narrowest(top, width):
    assert width_for(top) == width and WIDTHS == (16, 24, 32)


def test_width_for_refuses_more_than_32_bits():
    with pytest.raises(GraphError, match="more than 32 bits"):
        width_for(1 << 32)


def test_data_top_is_the_largest_coordinate_or_position():
    assert data_top([70000], [10, 10]) == 69999                 # a coordinate
    assert data_top([512, 512], [512, 78512, 78512]) == 78512   # a position (seg entry)


def test_tensor_width_from_shape_and_capacity():
    p = Program("w")
    small = p.tensor("S", "input", [8, 10], ["dense", "compressed"])
    big = p.tensor("B", "input", [300, 300], ["dense", "compressed"])                 # worst case 90000
    bounded = p.tensor("C", "input", [300, 300], ["dense", "compressed"], capacity=[300, 1000, 1000])
    vec = p.tensor("v", "input", [70000], ["compressed"], capacity=[10, 10])
    assert [tensor_width(t) for t in (small, big, bounded, vec)] == [16, 24, 16, 24]


def test_program_width_includes_node_sizes_and_is_assigned():
    p = Program("w")
    p.tensor("c", "input", [4], ["compressed"])
    k = p.kernel("main")
    root = k.add("root")
    k.add("level_scan", {"ref": root["ref"]}, format="dense", dim=100000)
    assert program_width(p) == 24
    rep = assign_widths(p)
    assert p.config["crd_width"] == 24 and rep["tensors"] == {"c": 16}


def test_check_fits_width_names_the_tensor_and_the_width():
    p = Program("w")
    p.tensor("B", "input", [512, 512], ["dense", "compressed"])
    check_fits_width(p, "B", [512, 512], [512, 65535, 65535])
    with pytest.raises(TensorError, match=r"^tensor B: positions up to 78512 need a 24-bit coordinate width, "
                                          r"the graph declares crd_width 16"):
        check_fits_width(p, "B", [512, 512], [512, 78512, 78512])
    with pytest.raises(HardwareError, match="coordinates up to 69999 need a 24-bit"):
        check_fits_width(p, "v", [70000], [3, 3], error=HardwareError)


def test_builders_choose_the_width_from_the_capacities():
    assert kernels.spmv(8, 10, fmt="csr").config["crd_width"] == 16
    p = kernels.spmv(512, 512, fmt="csr")                       # worst case 262144 positions
    assert p.config["crd_width"] == 24 and p.tensors["B"].capacity == [512, 262144, 262144]


@pytest.fixture
def narrow_graph(tmp_path):
    """SpMV 300 x 300 whose graph was forced to 16-bit coordinates, with data of 81,000 nonzeros."""
    p = kernels.spmv(300, 300, fmt="csr", passes={"profile": False})
    doc = p.to_json()
    doc["config"]["crd_width"] = 16
    for t in doc["tensors"]:
        t.pop("capacity", None)
    (tmp_path / "graph.json").write_text(json.dumps(doc))
    rng = np.random.default_rng(3)
    B = kernels.random_sparse(rng, (300, 300), 0.9)
    save_npz(tmp_path / "data.npz", {"B": sp.csr_array(B), "c": kernels.random_sparse(rng, (300,), 0.5)})
    return tmp_path, int((B != 0).sum())


@pytest.mark.parametrize("cmd", [["fuseflow.sim", "run"], ["fuseflow.hw", "build", "-o", "BUILD"]])
def test_sim_and_hw_refuse_data_wider_than_the_graph_alike(narrow_graph, cmd):
    tmp, nnz = narrow_graph
    assert nnz > 65535
    args = [a.replace("BUILD", str(tmp / "build")) for a in cmd]
    p = subprocess.run([sys.executable, "-m", *args, str(tmp / "graph.json"), "--inputs", str(tmp / "data.npz")],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.strip() == (f"error: tensor B: positions up to {nnz} need a 24-bit coordinate width, the graph "
                                f"declares crd_width 16 (recompile, or rebuild the graph with a wider crd_width)")
    assert not (tmp / "build").exists()


def test_memories_take_each_tensors_own_index_width():
    from fuseflow.hw.memory import plan_memories
    p = kernels.spmv(300, 300, fmt="csr", passes={"profile": False})      # B: 90000 positions; c, x: 300
    plan = plan_memories(p)
    assert plan.crd_width == 24
    assert plan.index_widths == {"B": 24, "c": 16, "x": 16}
    widths = {m.name: m.width for m in plan.memories}
    assert widths["B.1.seg"] == 24                 # positions up to 90000
    assert widths["B.1.crd"] == 16                 # coordinates below 300
    assert widths["c.0.crd"] == widths["x.0.seg"] == 16 and widths["B.vals"] == 32
