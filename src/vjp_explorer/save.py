"""Result -> every array in binary (`--save FILE.npz` with numpy, `FILE.pt` with torch.save), for scripts.

The keys name where each array sits in the JSON (docs/json.md): `inputs/a`, `output`, `grad` (v),
`grads/a`, `jtv/a`, `symbolic/a`, `jacobian/a`, `jacobian_diagonal/a`, `intermediates/h`,
`intermediate_grads/h`, `probe_rows/a`. An array the run did not build (J past its budget, a skipped
symbolic route) has no key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .outfiles import check_writable, wrote

if TYPE_CHECKING:
    from .result import Result, TensorData

SUFFIXES = (".npz", ".pt")


def check_path(path: Path) -> None:
    """Refuse a file we could not write, before any work is done."""
    if path.suffix not in SUFFIXES:
        raise UsageError(
            f"--save writes .npz (numpy) or .pt (torch) files, not {path.suffix or 'a file without a suffix'!r}.",
            hint="Name the file FILE.npz or FILE.pt.",
        )
    check_writable("--save", path)


def arrays(r: Result) -> Iterator[tuple[str, TensorData]]:
    """Each array of the result with its key, in the JSON's order."""
    for name, i in r.inputs.items():
        yield f"inputs/{name}", i.value
    yield "output", r.output
    yield "grad", r.grad
    for name, g in r.grads.items():
        yield f"grads/{name}", g
    for name, j in r.jacobians.items():
        if j.value is not None:
            yield f"jacobian/{name}", j.value
        if j.diagonal is not None:
            yield f"jacobian_diagonal/{name}", j.diagonal
    for name, t in r.jtv.items():
        if t is not None:
            yield f"jtv/{name}", t
    for name, t in (r.symbolic or {}).items():
        yield f"symbolic/{name}", t
    for name, m in r.intermediates.items():
        yield f"intermediates/{name}", m.value
        if m.grad is not None:
            yield f"intermediate_grads/{name}", m.grad
    if r.probe is not None and r.probe.rows is not None:
        for name, t in r.probe.rows.items():
            yield f"probe_rows/{name}", t


def to_numpy(t: TensorData) -> Any:
    """The array with its shape and dtype; a view of the result's buffer where it has one."""
    import numpy as np

    a = t.view(np.ndarray)
    return a if a.flags.c_contiguous else a.copy()  # a constant's zero-stride view is written out whole


def save(r: Result, path: Path) -> None:
    """Write every array of r to path (.npz or .pt, by its suffix)."""
    check_path(path)
    data = {key: to_numpy(t) for key, t in arrays(r)}
    try:
        if path.suffix == ".npz":
            import numpy as np

            with path.open("wb") as f:
                np.savez(f, **data)
        else:
            import torch

            torch.save({k: torch.from_numpy(v) for k, v in data.items()}, path)
    except OSError as e:
        raise UsageError(f"--save could not write {str(path)!r}: {e.strerror or e}.") from None
    wrote(path, f"{len(data)} arrays, {'numpy .npz' if path.suffix == '.npz' else 'torch.save'}; keys as in the JSON")
