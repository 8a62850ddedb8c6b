"""Random source programs for property-based tests: 2 to 5 statements over order-1 to order-3 tensors with
random formats, mode orders and densities (empty fibres included)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

POOL = ("i", "j", "k", "l")


@dataclass
class RandomProgram:
    text: str
    size: int
    densities: dict = field(default_factory=dict)
    nstmts: int = 0

    def __repr__(self):
        return f"RandomProgram(size={self.size}, densities={self.densities!r}, text=\n{self.text})"


@st.composite
def random_programs(draw, max_stmts=5, allow_exp=True, allow_div=True, concordant=False, sizes=(2, 3, 4)):
    """``concordant``: every access lists its indices in the global order i < j < k < l and order-3
    tensors keep the identity mode order, so storage orders never conflict (order-2 tensors still get
    random mode orders: those conflicts are broken by transposes)."""
    n = draw(st.sampled_from(list(sizes)))
    ninputs = draw(st.integers(2, 4))
    lines = []
    avail = {}                      # tensor -> order
    dens = {}
    for t in range(ninputs):
        name = "ABCDGH"[t]
        order = draw(st.integers(1, 3))
        levels = "".join(draw(st.sampled_from("dc")) for _ in range(order))
        perm = draw(st.permutations(list(range(order)))) if draw(st.integers(0, 2)) == 0 else range(order)
        if concordant and order == 3:
            perm = range(order)
        dens[name] = draw(st.sampled_from([0.0, 0.15, 0.4, 0.8, 1.0]))
        shape = ", ".join([str(n)] * order)
        fmt = levels + (":" + ",".join(map(str, perm)) if list(perm) != list(range(order)) else "")
        lines.append(f"tensor {name}({shape}) : {fmt}")
        avail[name] = order
    nst = draw(st.integers(2, max_stmts))
    stmts = []
    for s in range(nst):
        nidx = draw(st.integers(1, 4))
        pool = list(POOL[:nidx]) if nidx >= 1 else ["i"]

        def access():
            name = draw(st.sampled_from(sorted(avail)))
            order = avail[name]
            if order > len(pool):
                idx = draw(st.permutations(list(POOL)))[:order]
            else:
                idx = draw(st.permutations(pool))[:order]
            if concordant and order == 3:
                idx = sorted(idx)
            return f"{name}({','.join(idx)})"

        def product(k):
            return " * ".join(access() for _ in range(k))

        def expr(depth):
            choice = draw(st.integers(0, 9 if depth > 0 else 1))
            if choice <= 1 or depth == 0:
                return access() if choice == 0 else product(2)
            if choice == 2:
                return f"{expr(depth - 1)} * {expr(depth - 1)}"
            if choice == 3:
                return f"({expr(depth - 1)} + {expr(depth - 1)})"
            if choice == 4:
                return f"({expr(depth - 1)} - {access()})"
            if choice == 5:
                return f"relu({expr(depth - 1)})"
            if choice == 6:
                c = draw(st.sampled_from(["2", "0.5", "-1.5"]))
                return f"{c} * {expr(depth - 1)}"
            if choice == 7:
                inner = product(draw(st.integers(1, 2)))
                r = draw(st.sampled_from(pool))
                # relu keeps the body nonnegative: max over visited entries then equals NumPy's max over
                # nonzero entries (they differ only on stored zeros of negative fibres; docs/language.md)
                return f"max[{r}](relu({inner}))"
            if choice == 8:
                if allow_exp and draw(st.integers(0, 3)) == 0:
                    return f"exp({access()})"
                return f"neg({expr(depth - 1)})"
            if allow_div and draw(st.integers(0, 2)) == 0:
                return f"{expr(depth - 1)} / {draw(st.sampled_from(['2', '4']))}"
            return f"{expr(depth - 1)} + {access()}"

        rhs = expr(draw(st.integers(0, 2)))
        from fuseflow.samml.expr import _Parser, free_indices
        free = free_indices(_Parser(f"X() = {rhs}", 1).statement().rhs)
        # most statements keep 1-2 free indices (reductions over the rest); a few reduce to a scalar
        k = draw(st.integers(0, min(3, len(free))))
        if k == 0 and draw(st.integers(0, 3)) != 0 and free:
            k = 1
        lhs_idx = draw(st.permutations(free))[:k] if free else []
        if concordant and len(lhs_idx) == 3:
            lhs_idx = sorted(lhs_idx)
        name = f"T{s}"
        stmts.append(f"{name}({','.join(lhs_idx)}) = {rhs}")
        avail[name] = len(lhs_idx)
    # random contiguous fuse regions
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, nst - 1)), max_size=2))))
    body = []
    start = 0
    for c in cuts + [nst]:
        if c <= start:
            continue
        chunk = stmts[start:c]
        if len(chunk) > 1 and draw(st.booleans()):
            body.append("fuse {")
            body += ["  " + x for x in chunk]
            body.append("}")
        else:
            body += chunk
        start = c
    text = "\n".join(lines + body) + "\n"
    return RandomProgram(text, n, dens, nst)
