"""Batch inference over a Ray Dataset (`pip install pdlite[ray]`); see docs/batch.md.

    with pdlite_errors():  # a pdlite error in an actor comes back as itself, not in Ray's wrapper
        ds.map_batches(PdliteModel, fn_constructor_kwargs={"model": "model_dir_or.nb"},
                       compute=ray.data.ActorPoolStrategy(size=2), batch_size=64).take_all()

`PdliteModel` is a callable class: Ray builds one per actor, so each actor loads the model
once (one predictor) and then runs every batch it is given. Rows are items; by default an
item is one sample *without* the batch axis and outputs come back the same way, one row per
item, as columns named after the model's outputs. Items of different shapes in one batch are
run item by item (default: each output is then bit-identical whatever the batching), or, with
`stack=True`, grouped by shape and each group stacked into one model call.

`PdliteModel` itself needs no Ray (`pdlite batch` runs it in a process pool too); the helpers
below (`require_ray`, `connect`, `predict_dataset`) import Ray when called; `pdlite_errors` unwraps a pdlite
error from Ray's `RayTaskError(UserCodeException)` (1.6 KB of the actor's traceback) on the driver.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, InputError, MissingDependencyError, PdliteError
from pdlite.integrations import predictor_from_path

# column a single-input model reads when no column has its input's name: Ray's read_numpy, read_images
DEFAULT_COLUMNS = ("data", "image")


class PdliteModel:
    """One pdlite predictor per Ray actor, called on batches (dicts of NumPy columns).

    model: a model folder (legacy or PIR), or an optimized `.nb` (or a program file + `params`).
    inputs: model input name -> column (default: the column named like the input; a single-input
        model also reads "data" or "image").
    outputs: output names to return (a list), or output name -> column (a dict); default all, by name.
    add_batch_axis: True (default): a row is one sample without the batch axis; outputs are split
        back along axis 0. False: a row is a complete feed, run as is; outputs are returned whole.
    stack: with add_batch_axis, stack the rows whose inputs have the same shapes and dtypes into one
        model call (faster; BLAS may then round the last bits differently from a one-item call).
        False (default): item by item.
    keep_columns: columns copied to the output (True: all but the input columns; or a list; or False).
    key_column: a column naming each row (an id or a path), quoted in error messages.
    threads, options: the predictor's thread count (default 1) and pdlite options (`config.set_option`).
    """

    def __init__(self, model: str | os.PathLike, params: str | os.PathLike | None = None, *,
                 inputs: Mapping[str, str] | None = None, outputs: Sequence[str] | Mapping[str, str] | None = None,
                 add_batch_axis: bool = True, stack: bool = False, keep_columns: bool | Sequence[str] = True,
                 key_column: str | None = None, threads: int = 1, options: Mapping[str, Any] | None = None) -> None:
        if stack and not add_batch_axis:
            raise ConfigError("PdliteModel: stack=True needs add_batch_axis=True (rows without the batch axis)")
        self.predictor = predictor_from_path(model, params, threads=threads, options=options)
        self.input_names: list[str] = self.predictor.get_input_names()
        self.output_names: list[str] = self.predictor.get_output_names()
        self.inputs = dict(inputs or {})
        for name in self.inputs:
            if name not in self.input_names:
                raise ConfigError(f"PdliteModel inputs: the model has no input {name!r}; inputs are {self.input_names}")
        if outputs is None:
            self.outputs = {n: n for n in self.output_names}
        elif isinstance(outputs, Mapping):
            self.outputs = dict(outputs)
        else:
            self.outputs = {n: n for n in outputs}
        for name in self.outputs:
            if name not in self.output_names:
                raise ConfigError(f"PdliteModel outputs: the model has no output {name!r}; "
                                  f"outputs are {self.output_names}")
        self.add_batch_axis = add_batch_axis
        self.stack = stack
        self.keep_columns = keep_columns
        self.key_column = key_column

    # -- columns ------------------------------------------------------------------------------
    def _column_of(self, name: str, batch: Mapping[str, Any]) -> str:
        col = self.inputs.get(name, name)
        if col in batch:
            return col
        if name not in self.inputs and len(self.input_names) == 1:
            for c in DEFAULT_COLUMNS:
                if c in batch:
                    return c
        raise InputError(f"{self._where(batch, None)}no column {col!r} for the model input {name!r}; columns are "
                         f"{sorted(batch)} (map inputs with PdliteModel(..., inputs={{{name!r}: 'COLUMN'}}))")

    def _where(self, batch: Mapping[str, Any], rows: Sequence[int] | None) -> str:
        """'a.npy: ' (the key column's value of the rows concerned), or '' when there is no key column."""
        if self.key_column is None or self.key_column not in batch:
            return ""
        keys = batch[self.key_column]
        picked = [keys[i] for i in (rows if rows is not None else range(len(keys)))]
        text = ", ".join(str(k) for k in picked[:3]) + (", ..." if len(picked) > 3 else "")
        return f"{text}: "

    # -- the call -----------------------------------------------------------------------------
    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Run the model on every row of `batch`; return the output columns (+ the kept columns)."""
        if not isinstance(batch, Mapping):
            raise InputError(f"PdliteModel takes batches as dicts of NumPy columns, got {type(batch).__name__} "
                             "(use map_batches(..., batch_format='numpy'))")
        cols = {n: self._column_of(n, batch) for n in self.input_names}
        n_rows = len(next(iter(batch.values()))) if batch else 0
        rows = {n: [np.asarray(v) for v in batch[c]] for n, c in cols.items()}
        results: dict[str, list[Any]] = {n: [None] * n_rows for n in self.outputs}
        for group in self._groups(rows, n_rows):
            self._run_group(batch, rows, group, results)
        out: dict[str, Any] = {}
        keep = self.keep_columns
        if keep is True:
            keep = [c for c in batch if c not in cols.values()]
        for c in keep or []:
            if c not in batch:
                raise InputError(f"PdliteModel keep_columns: no column {c!r}; columns are {sorted(batch)}")
            out[c] = batch[c]
        for name, col in self.outputs.items():
            if col in out:
                raise InputError(f"output column {col!r} (model output {name!r}) would replace the kept column "
                                 f"{col!r}: rename it with outputs={{{name!r}: 'NEW'}} or drop it from keep_columns")
            out[col] = _column(results[name])
        return out

    def _groups(self, rows: dict[str, list[np.ndarray]], n_rows: int) -> list[list[int]]:
        if not self.stack:
            return [[i] for i in range(n_rows)]
        groups: dict[tuple, list[int]] = {}
        for i in range(n_rows):
            key = tuple((rows[n][i].shape, rows[n][i].dtype.str) for n in self.input_names)
            groups.setdefault(key, []).append(i)
        return list(groups.values())

    def _run_group(self, batch: Mapping[str, Any], rows: dict[str, list[np.ndarray]], group: list[int],
                   results: dict[str, list[Any]]) -> None:
        if self.add_batch_axis:
            feeds = {n: np.stack([rows[n][i] for i in group]) for n in self.input_names}
        else:
            feeds = {n: rows[n][group[0]] for n in self.input_names}
        try:
            outs = dict(zip(self.output_names, self.predictor.predict(feeds)))
        except PdliteError as e:
            where = self._where(batch, group) or (f"row {group[0]}: " if len(group) == 1 else f"rows {group}: ")
            raise type(e)(f"{where}{e}") from None
        for name in self.outputs:
            o = np.array(outs[name])  # a private copy: the next run may reuse the predictor's buffers
            if not self.add_batch_axis:
                results[name][group[0]] = o
                continue
            if o.ndim == 0 or o.shape[0] != len(group):
                raise InputError(f"{self._where(batch, group)}output {name!r} has shape {list(o.shape)}, not a "
                                 f"leading batch axis of {len(group)}: use PdliteModel(..., add_batch_axis=False) "
                                 "with rows that are complete feeds")
            for j, i in enumerate(group):
                results[name][i] = o[j]


def _column(values: list[np.ndarray]) -> Any:
    """One ndarray when every row has the same shape and dtype, else a list (a variable-shaped column)."""
    if values and all(v.shape == values[0].shape and v.dtype == values[0].dtype for v in values):
        return np.stack(values)
    return list(values)


# -- Ray helpers ------------------------------------------------------------------------------
def require_ray() -> Any:
    """`import ray` (with Ray Data), or a pdlite error naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(f"batch inference on Ray needs Ray Data ({e}): pip install pdlite[ray]") from None
    return ray


def connect(address: str | None = "local", num_cpus: int | None = None) -> Any:
    """Join the Ray cluster at `address` ("auto", "ray://host:10001", "host:6379"), or start a local
    instance ("local" or None, with `num_cpus`); reuse the connection when Ray is already initialised."""
    ray = require_ray()
    if not ray.is_initialized():
        if address in (None, "", "local"):
            ray.init(num_cpus=num_cpus, include_dashboard=False)
        else:
            ray.init(address=address)
    return ray


def predict_dataset(ds: Any, model: str | os.PathLike, *, concurrency: int = 1, batch_size: int | None = 32,
                    num_cpus: float | None = None, **model_kwargs: Any) -> Any:
    """`ds.map_batches(PdliteModel, ...)` with a pool of `concurrency` actors, each holding one predictor
    (`model_kwargs` go to PdliteModel); each actor reserves `num_cpus` (default: its thread count)."""
    ray = require_ray()
    kwargs = dict(model_kwargs, model=os.fspath(model))
    return ds.map_batches(PdliteModel, fn_constructor_kwargs=kwargs, batch_size=batch_size, batch_format="numpy",
                          compute=ray.data.ActorPoolStrategy(size=int(concurrency)),
                          num_cpus=num_cpus if num_cpus is not None else kwargs.get("threads", 1))


@contextlib.contextmanager
def pdlite_errors() -> Iterator[None]:
    """Re-raise a pdlite error that Ray wrapped on its way from an actor (`RayTaskError(UserCodeException)`, whose
    message is the actor's whole traceback) as the pdlite error itself, with its one-line message:

        with pdlite_errors():
            rows = ds.map_batches(PdliteModel, ...).take_all()

    Inside it, Ray Data's `raise_original_map_exception` is on (Ray then keeps the error object as the wrapper's
    `cause`; without it only the text of the traceback names the pdlite error, which is parsed then). Other
    exceptions pass unchanged."""
    ctx: Any = None
    try:
        import ray.data

        ctx = ray.data.DataContext.get_current()
    except ImportError:
        pass
    old = getattr(ctx, "raise_original_map_exception", None)
    if old is not None:
        ctx.raise_original_map_exception = True
    try:
        yield
    except Exception as e:
        cause = pdlite_cause(e)
        if cause is e:
            raise
        if cause is None:
            cause = _pdlite_error_in_text(str(e))
            if cause is None:
                raise
        raise type(cause)(str(cause)) from None
    finally:
        if old is not None:
            ctx.raise_original_map_exception = old


def _pdlite_error_in_text(text: str) -> PdliteError | None:
    """The last `pdlite.errors.NAME: message` line of a remote traceback as that pdlite error (or None)."""
    from pdlite import errors

    found = None
    for line in text.splitlines():
        m = re.match(r"pdlite\.errors\.(\w+): (.*)$", line.strip())
        if m is None:
            continue
        cls = getattr(errors, m.group(1), None)
        if isinstance(cls, type) and issubclass(cls, PdliteError):
            found = cls(m.group(2))
    return found


def pdlite_cause(exc: BaseException) -> PdliteError | None:
    """The pdlite error behind an exception Ray raised on the driver (None when there is none)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, PdliteError) and type(e).__module__.startswith("pdlite"):  # not Ray's dual-class wrapper
            return e
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return None
