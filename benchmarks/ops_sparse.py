"""`bench --only ops` cases for sparse COO tensors (ember/ops/sparse_ops.py), sparse embedding gradients and
embedding_bag (ember/ops/nn_misc.py), each against the NumPy/SciPy routine doing the same work."""
import numpy as np

from benchmarks.ops import Case

ROWS, COLS, NNZ, K = 20_000, 20_000, 200_000, 64  # a 0.05% dense matrix times 64 dense columns


def _spmm(rng):
    lin = np.unique(rng.integers(0, ROWS * COLS, NNZ))  # coalesced: sorted, unique positions
    return {"i": np.stack(np.unravel_index(lin, (ROWS, COLS))).astype(np.int64),
            "v": rng.standard_normal(lin.size).astype(np.float32),
            "d": rng.standard_normal((COLS, K)).astype(np.float32)}


def _scipy_spmm(a):
    from scipy.sparse import csr_matrix
    return csr_matrix((a["v"], (a["i"][0], a["i"][1])), shape=(ROWS, COLS)) @ a["d"]


def _coo(rng):
    return {"i": rng.integers(0, 2000, (2, NNZ)), "v": rng.standard_normal(NNZ).astype(np.float32)}


def _scipy_coalesce(a):
    from scipy.sparse import coo_matrix
    m = coo_matrix((a["v"], (a["i"][0], a["i"][1])), shape=(2000, 2000))
    m.sum_duplicates()
    return m


N_EMB, DIM, N_IDX, BAGS = 100_000, 64, 50_000, 2_000


def _bag(rng):
    starts = np.sort(rng.choice(np.arange(1, N_IDX), BAGS - 1, replace=False))
    return {"w": rng.standard_normal((N_EMB, DIM)).astype(np.float32), "idx": rng.integers(0, N_EMB, N_IDX),
            "off": np.concatenate([[0], starts])}


def _bag2d(rng):
    return {"w": rng.standard_normal((N_EMB, DIM)).astype(np.float32), "idx": rng.integers(0, N_EMB, (2_500, 20))}


CASES = [
    Case("sparse.mm 20000x20000 (200k nnz) @ 20000x64", _spmm,
         lambda E, a: E.sparse.mm(E.sparse_coo_tensor(a["i"], a["v"], (ROWS, COLS), is_coalesced=True), a["d"]),
         ("scipy csr @ dense", _scipy_spmm),
         lambda T, a: T.sparse.mm(T.sparse_coo_tensor(a["i"], a["v"], (ROWS, COLS), is_coalesced=True), a["d"]),
         grad=True),
    Case("coalesce 200k entries of 2000x2000", _coo,
         lambda E, a: E.sparse_coo_tensor(a["i"], a["v"], (2000, 2000)).coalesce(),
         ("scipy coo sum_duplicates", _scipy_coalesce),
         lambda T, a: T.sparse_coo_tensor(a["i"], a["v"], (2000, 2000)).coalesce()),
    Case("embedding_bag sum 100000x64, 50k indices in 2000 bags", _bag,
         lambda E, a: E.nn.functional.embedding_bag(a["idx"], a["w"], a["off"], mode="sum"),
         ("np.add.reduceat(w[idx], offsets)", lambda a: np.add.reduceat(a["w"][a["idx"]], a["off"], axis=0)),
         lambda T, a: T.nn.functional.embedding_bag(a["idx"], a["w"], a["off"], mode="sum"), grad=True),
    Case("embedding_bag mean 2-D (2500, 20) of 100000x64", _bag2d,
         lambda E, a: E.nn.functional.embedding_bag(a["idx"], a["w"], mode="mean"),
         ("w[idx].mean(1)", lambda a: a["w"][a["idx"]].mean(1)),
         lambda T, a: T.nn.functional.embedding_bag(a["idx"], a["w"], mode="mean"), grad=True),
    Case("embedding_bag max 2-D (2500, 20) of 100000x64", _bag2d,
         lambda E, a: E.nn.functional.embedding_bag(a["idx"], a["w"], mode="max"),
         ("w[idx].max(1)", lambda a: a["w"][a["idx"]].max(1)),
         lambda T, a: T.nn.functional.embedding_bag(a["idx"], a["w"], mode="max"), grad=True),
    Case("embedding sparse=True 100000x64, (2500, 20) indices", _bag2d,
         lambda E, a: E.nn.functional.embedding(a["idx"], a["w"], sparse=True),
         ("w[idx]", lambda a: a["w"][a["idx"]]),
         lambda T, a: T.nn.functional.embedding(a["idx"], a["w"], sparse=True), grad=True),
]
