"""The panel layout, for a small model's weights: W [n_in, n_out] cut into contiguous panels of columns.

A small model (one that streams under threads.SHARE_MIN_BYTES per token, the learned pair) runs
on the calling thread alone, so the blocked layout's shares buy it nothing, and its short rows
(n_in of a few hundred) make blocked.py's products slow: a one-row product over W.T is a dot
product per row, and k rows are many small calls whose time adds to the weights' streaming
instead of hiding behind it. Here W keeps the checkpoint's orientation, cut into panels of
`width` columns, each contiguous:

    panels [n_panels, n_in, width]     panels[j] = W[:, j * width:(j + 1) * width]

and x @ W is one NumPy call over every panel, each panel an OpenBLAS small-matrix product
[k, n_in] @ [n_in, width] that reads the panel once, front to back, with the k rows of x
beside it: k rows cost little more than one (PERFORMANCE.md has the figures).

Two rules keep every call in the small-matrix kernel (its limits: blocked.SMALL_MNK and
SMALL_MN). The width is the widest of 64, 32, 16 that takes VERIFY_ROWS rows (64 for n_in of
288, 32 for 1152); more rows than a panel takes go in several calls. And one row goes as two,
the second zero: NumPy hands a single row to gemv, whose kernel is slower on short panels
than the small gemm kernel.

The LM head multiplies by wte.T: a Table keeps wte.T in panels, and its rows (wte[ids], the
embedding lookup) are read back out of them.

Several rows by panels is arithmetic more than memory: second_core.py gives half of the panels of
such a product to a helper process, whose calls are product_into's, so the output is the same.
"""

import numpy as np

from workbench.speed.blocked import SMALL_MN, SMALL_MNK, Transposed

VERIFY_ROWS = 16  # the widest verification a panel takes in one call (15 drafts and the last token)
WIDTHS = (64, 32, 16)


def panel_width(n_in):
    """The widest panel whose product with VERIFY_ROWS rows stays in OpenBLAS's small-matrix kernel."""
    for width in WIDTHS:
        if width * VERIFY_ROWS <= SMALL_MN and width * VERIFY_ROWS * n_in <= SMALL_MNK:
            return width
    return WIDTHS[-1]


def to_panels(w, width=None):  # W [n_in, n_out] -> [n_panels, n_in, width], zero columns appended
    n_in, n_out = w.shape
    width = width or panel_width(n_in)
    n_panels = -(-n_out // width)
    panels = np.zeros((n_panels, n_in, width), dtype=np.float32)
    for j in range(n_panels):
        part = w[:, j * width:(j + 1) * width]
        panels[j, :, :part.shape[1]] = part
    return panels


def rows_per_call(width, n_in):
    """The most rows of x one small-matrix call takes against a panel [n_in, width]."""
    return max(1, min(SMALL_MN // width, SMALL_MNK // (width * n_in)))


def product(x, panels):  # [n_seq, n_in] @ panels [n_panels, n_in, width] -> [n_seq, n_panels * width]
    n_panels, n_in, width = panels.shape
    if x.dtype != np.float32:
        raise TypeError(f"x is {x.dtype}: the model computes in float32")
    n_seq = len(x)
    if n_seq == 1:  # as two rows, the second zero: the small gemm kernel, not gemv
        x = np.concatenate([x, np.zeros_like(x)])
    out = np.empty((len(x), n_panels * width), dtype=np.float32)
    product_into(x, panels, out.reshape(len(x), n_panels, width).transpose(1, 0, 2))
    return out[:n_seq]


def product_into(x, panels, by_panel):  # [n_seq, n_in] @ [n_panels, n_in, width] -> by_panel [n_panels, n_seq, width]
    """x @ panels[j] into by_panel[j] for every panel j, as few small-matrix calls as the kernel's limits allow.
    by_panel is a view of the output (product's, or second_core's shares of it)."""
    step = rows_per_call(panels.shape[2], panels.shape[1])
    for start in range(0, len(x), step):
        rows = slice(start, start + step)
        np.matmul(x[rows], panels, out=by_panel[:, rows])


class Panels:
    """W [n_in, n_out] for `x @ W`, kept in panels."""

    __array_ufunc__ = None  # NumPy then leaves `ndarray @ Panels` to __rmatmul__ below

    def __init__(self, panels, n_out):
        self.panels = panels  # [n_panels, n_in, width]; columns past n_out are zero padding
        self.shape = (panels.shape[1], n_out)

    def __rmatmul__(self, x):  # x [n_seq, n_in] @ W -> [n_seq, n_out]; a batch's [n_rows, n_seq, n_in] as its rows
        if x.ndim > 2:
            return (x.reshape(-1, x.shape[-1]) @ self).reshape(*x.shape[:-1], self.shape[1])
        out = product(x, self.panels)
        return out if out.shape[1] == self.shape[1] else out[:, :self.shape[1]]

    @property
    def nbytes(self):  # what streaming it costs, padding included
        return self.panels.nbytes

    def __array__(self, dtype=None, copy=None):  # np.asarray(W): the plain matrix
        return np.asarray(self.panels.transpose(1, 0, 2).reshape(self.shape[0], -1)[:, :self.shape[1]], dtype=dtype)


class Table(Transposed):
    """The token embedding wte [vocab_size, n_embd]: rows to look up, and the LM head's `x @ wte.T` in panels."""

    def __getitem__(self, ids):  # wte[ids] -> [len(ids), n_embd]: column id of wte.T, out of its panel
        ids = np.arange(self.shape[0])[ids]  # any index NumPy takes, checked against vocab_size
        panels = self.T.panels  # self.T: the Panels of wte.T [n_embd, vocab_size]
        width = panels.shape[2]
        return np.ascontiguousarray(panels[ids // width, :, ids % width])


LINEARS = {"attn": ("c_attn", "c_proj"), "mlp": ("c_fc", "c_proj")}  # each block's linear weights


def in_panels(params, kind=Panels):
    """A model's params (gpt2.nest's tree) with every linear weight a Panels (or `kind`, a subclass: second_core's)
    and wte a Table; other arrays as they are. Weights already in panels stay (a model made of another's layers,
    beyond/self_speculative.py)."""
    def linear(node):
        w = node["weight"]
        return {**node, "weight": kind(to_panels(np.asarray(w, dtype=np.float32)), w.shape[1])}

    def layer_in_panels(layer):  # the same dict when it is in panels already: a model cut from another shares its layers
        if all(isinstance(layer[part][name]["weight"], Panels) for part, names in LINEARS.items() for name in names):
            return layer
        return {**layer, **{part: {**layer[part], **{name: linear(layer[part][name]) for name in names}}
                            for part, names in LINEARS.items()}}

    layers = [layer_in_panels(layer) for layer in params["h"]]
    wte = params.get("wte")
    if wte is not None and not isinstance(wte, Table):
        wte = Table(kind(to_panels(np.asarray(wte, dtype=np.float32).T), wte.shape[0]))
    return {**params, "h": layers, **({"wte": wte} if wte is not None else {})}
