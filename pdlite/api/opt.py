"""`Opt`, as paddlelite's: run the analysis phase once and write the optimized model (`.nb`).

    opt = Opt()
    opt.set_model_dir("mobilenet_v1")
    opt.set_valid_places("x86,host")
    opt.set_optimize_out("mobilenet_v1_opt")   # writes mobilenet_v1_opt.nb
    opt.run()

Also answers which ops pdlite supports: all of them per target (`print_all_ops`), those of
the valid targets (`print_supported_ops`), and those of one model (`print_model_ops`).
"""
from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pdlite.api.config import warn_host_fallback
from pdlite.core.types import FP16_TARGETS, DataLayoutType, Place, PrecisionType, TargetType, with_fp16_places
from pdlite.errors import ConfigError, ModelFormatError, PdliteError

MODEL_TYPES = ("naive_buffer", "protobuf")
_NOT_TARGETS = (TargetType.Unk, TargetType.Any)
_CPU_TARGETS = (TargetType.Host, TargetType.X86, TargetType.ARM)

Progress = Callable[[str], None]


def parse_valid_targets(spec: str | Sequence[Place | str | TargetType]) -> list[Place]:
    """Places from paddle_lite_opt's `--valid_targets` ("x86,host"), or from Places / target names."""
    items: list[Any] = [s for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    places: list[Place] = []
    for it in items:
        if isinstance(it, Place):
            place = it
        elif isinstance(it, TargetType):
            place = Place(it, PrecisionType.FP32, DataLayoutType.NCHW)
        elif isinstance(it, str) and it.strip():
            place = Place(target_by_name(it.strip()), PrecisionType.FP32, DataLayoutType.NCHW)
        elif isinstance(it, str):
            continue
        else:
            raise ConfigError(f"valid places: expected a Place or a target name, got {it!r}")
        if place not in places:
            places.append(place)
    if not places:
        raise ConfigError(f"valid targets {spec!r}: give at least one target, e.g. 'host' or 'x86,host'")
    return places


def target_by_name(name: str) -> TargetType:
    """A TargetType by case-insensitive name ('x86', 'host', 'arm', 'cuda', ...)."""
    for t_name, t in TargetType.__members__.items():
        if t_name.lower() == name.lower() and t not in _NOT_TARGETS:
            return t
    names = ", ".join(n.lower() for n, t in TargetType.__members__.items() if t not in _NOT_TARGETS)
    raise ConfigError(f"unknown target {name!r}; valid targets are: {names}")


# -- op support ---------------------------------------------------------------------------------

def _registries() -> tuple[Any, Any]:
    from pdlite.kernels.registry import KERNELS
    from pdlite.operators.registry import OPS
    from pdlite.registries import load_registries

    load_registries()
    return OPS, KERNELS


def load_kernels_of(targets: Sequence[TargetType] | None = None) -> None:
    """Import the optional kernel packages (CUDA needs torch) of `targets`, or of every target that
    has one; a package whose backend is not installed is left out of the tables."""
    from pdlite.registries import TARGET_KERNEL_MODULES, load_target_kernels

    for t in (TARGET_KERNEL_MODULES if targets is None else targets):
        try:
            load_target_kernels([t])
        except (ImportError, PdliteError):
            pass


def kernel_targets() -> list[TargetType]:
    """Every target some registered kernel runs on (Any excluded), in enum order."""
    _, kernels = _registries()
    return sorted({k.target for k in kernels if k.target not in _NOT_TARGETS})


def op_supported(op_type: str, target: TargetType) -> bool:
    """Whether the analysis can give `op_type` a kernel for a place on `target`.

    The op needs a definition and a kernel on that target, on Any, or on Host when the
    target is a CPU one (Host kernels serve X86 and ARM, as the kernel pick does).
    """
    ops, kernels = _registries()
    if op_type not in ops:
        return False
    for k in kernels:
        if k.op_type == op_type and (k.target in (target, TargetType.Any)
                                     or (k.target == TargetType.Host and target in _CPU_TARGETS)):
            return True
    return False


def all_ops() -> list[str]:
    """Every op type that has a definition or a kernel."""
    ops, kernels = _registries()
    return sorted(set(ops) | {k.op_type for k in kernels})


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)]) + "\n"


def all_ops_table_rows() -> list[list[str]]:
    """[header, *rows]: every op, and "Y" under each target that has a kernel for it."""
    load_kernels_of(None)
    targets = kernel_targets()
    return [["OP_name", *(t.name for t in targets)],
            *([op, *("Y" if op_supported(op, t) else "" for t in targets)] for op in all_ops())]


def all_ops_table() -> str:
    """paddle_lite_opt --print_all_ops: every op, and on which targets it has kernels."""
    header, *rows = all_ops_table_rows()
    return _table(header, rows) + f"{len(rows)} ops\n"


def supported_ops_text(places: Sequence[Place]) -> str:
    """paddle_lite_opt --print_supported_ops: the ops each valid target supports."""
    load_kernels_of([p.target for p in places])
    out = []
    for t in dict.fromkeys(p.target for p in places):
        ops = [op for op in all_ops() if op_supported(op, t)]
        out.append(f"Supported OPs on '{t.name}' ({len(ops)}):")
        line = " "
        for op in ops:
            if len(line) + len(op) > 100:
                out.append(line.rstrip())
                line = " "
            line += " " + op
        out.append(line.rstrip())
    return "\n".join(out) + "\n"


@dataclass
class ModelOpsReport:
    """The op types of a model and, per target, whether each is supported."""

    counts: dict[str, int]
    targets: list[TargetType]
    support: dict[str, dict[TargetType, bool]]
    valid_targets: list[TargetType]

    def unsupported(self) -> list[str]:
        """Op types no valid target (nor the Host fallback) can run."""
        return sorted(op for op, s in self.support.items()
                      if not any(s[t] for t in self.valid_targets) and not s.get(TargetType.Host, False))

    def text(self) -> str:
        rows = [[op, str(n), *("Y" if self.support[op][t] else "-" for t in self.targets)]
                for op, n in sorted(self.counts.items())]
        out = _table(["OP_name", "count", *(t.name for t in self.targets)], rows)
        valid = ", ".join(t.name for t in self.valid_targets)
        bad = self.unsupported()
        if bad:
            out += f"Error: {len(bad)} op type(s) of the model are not supported on [{valid}] nor on Host: " \
                   f"{', '.join(bad)}\n"
        else:
            out += f"All {len(rows)} op types ({sum(self.counts.values())} ops) of the model are supported " \
                   f"on [{valid}].\n"
        return out


def model_op_counts(program: Any) -> dict[str, int]:
    """Op types of every block of a program with their counts (feed and fetch left out)."""
    c: Counter[str] = Counter(op.type for b in program.blocks for op in b.ops if op.type not in ("feed", "fetch"))
    return dict(c)


def model_ops_report(program: Any, places: Sequence[Place]) -> ModelOpsReport:
    valid = list(dict.fromkeys(p.target for p in places))
    load_kernels_of(valid)
    targets = list(dict.fromkeys([*valid, *kernel_targets()]))
    counts = model_op_counts(program)
    support = {op: {t: op_supported(op, t) for t in targets} for op in counts}
    return ModelOpsReport(counts, targets, support, valid)


def load_program(model_dir: str = "", model_file: str = "", param_file: str = "") -> Any:
    """The program of a model folder, a program file, or an optimized `.nb` (params not needed)."""
    path = model_file or model_dir
    if path and str(path).endswith(".nb") and os.path.isfile(path):
        from pdlite.model_parser.naive_buffer import load_naive_buffer

        return load_naive_buffer(path, use_mmap=True, verify=False).program
    return _load(model_dir, model_file, param_file).program


def _load(model_dir: str, model_file: str, param_file: str) -> Any:
    from pdlite.model_parser import load_model

    if not (model_dir or model_file):
        raise ConfigError("Opt: no model; call set_model_dir(dir) or set_model_file(f) (+ set_param_file(f))")
    return load_model(model_dir=model_dir or None, model_file=model_file or None, param_file=param_file or None)


def write_model_info(analysis: Any, out: str) -> None:
    """The op types and kernel keys the optimized model uses, one per line, beside `out`."""
    folder = os.path.dirname(os.path.abspath(out))
    ops = sorted({i.op.type for i in analysis.runtime.instructions})
    kernels = sorted({str(i.kernel_def.key) for i in analysis.runtime.instructions if i.kernel_def is not None})
    for name, lines in ((".tailored_ops_list", ops), (".tailored_kernels_list", kernels)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


QUANT_TYPES = ("QUANT_INT8", "QUANT_INT16")

# -- Opt ----------------------------------------------------------------------------------------

class Opt:
    """paddlelite's Opt: load a Paddle model, run the passes, write `<optimize_out>.nb`."""

    def __init__(self, progress: Progress | None = None) -> None:
        self._model_dir = ""
        self._model_file = ""
        self._param_file = ""
        self._places = [Place(TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW)]
        self._optimize_out = ""
        self._model_type = "naive_buffer"
        self._passes: list[str] | None = None
        self._options: dict[str, Any] = {}
        self._progress = progress
        self.last_report: dict[str, Any] = {}
        self.quant_model = False  # set_quant_model / set_quant_type (weight quantization)
        self.quant_type = "QUANT_INT16"
        self.fp16 = False
        self.sparse_model = False
        self.sparse_threshold = 0.6
        self.record_info = False
        self._modelset_dir = ""

    # -- settings (paddlelite names) ----------------------------------------------------------
    def set_model_dir(self, model_dir: str | os.PathLike) -> None:
        """The model folder to optimize (any layout pdlite reads)."""
        self._model_dir = os.fspath(model_dir)

    def set_model_file(self, model_file: str | os.PathLike) -> None:
        """The program file to optimize (with set_param_file for its params)."""
        self._model_file = os.fspath(model_file)

    def set_param_file(self, param_file: str | os.PathLike) -> None:
        """The combined params file of the program set with set_model_file."""
        self._param_file = os.fspath(param_file)

    def set_valid_places(self, places: str | Sequence[Place | str | TargetType]) -> None:
        """Targets as paddle_lite_opt's --valid_targets ("x86,host"), or a list of Places."""
        self._places = parse_valid_targets(places)

    def valid_places(self) -> list[Place]:
        """The places set with set_valid_places (a copy)."""
        return list(self._places)

    def set_optimize_out(self, path: str | os.PathLike) -> None:
        """Output path without suffix (".nb" is added; a path already ending in ".nb" is kept)."""
        self._optimize_out = os.fspath(path)

    def set_model_type(self, model_type: str) -> None:
        """The output format: 'naive_buffer' (one .nb file, the default) or 'protobuf' (.pdmodel + .pdiparams);
        ConfigError otherwise."""
        if model_type not in MODEL_TYPES:
            raise ConfigError(f"set_model_type({model_type!r}): expected one of {', '.join(MODEL_TYPES)}")
        self._model_type = model_type

    def set_passes_internal(self, passes: Sequence[str]) -> None:
        """Run these passes (in this order) instead of the default pipeline."""
        self._passes = list(passes)

    def set_option(self, key: str, value: Any) -> None:
        """A config option for the passes (as CxxConfig.set_option)."""
        self._options[key] = value

    # -- running ------------------------------------------------------------------------------
    def _say(self, msg: str) -> None:
        if self._progress is not None:
            self._progress(msg)

    def output_path(self) -> str:
        """The file run() writes: the optimize_out path plus '.nb' (naive_buffer) or the protobuf program path;
        ConfigError when no output was set."""
        if not self._optimize_out:
            raise ConfigError("Opt: no output; call set_optimize_out(path) (the .nb is written to path + '.nb')")
        out = self._optimize_out
        if self._model_type == "naive_buffer":
            return out if out.endswith(".nb") else out + ".nb"
        return out[:-len(".pdmodel")] if out.endswith(".pdmodel") else out

    def run(self) -> str:
        """Optimize the model and write it; returns the path written (the .nb, or the .pdmodel)."""
        from pdlite.model_parser.naive_buffer import save_optimized_model
        from pdlite.optimizer.analysis import analyse
        from pdlite.optimizer.pipeline import default_passes

        if self._modelset_dir:
            return self._run_model_set()
        out = self.output_path()
        passes = self._passes if self._passes is not None else default_passes()
        t0 = time.perf_counter()
        self._say(f"loading model {self._model_file or self._model_dir} ...")
        model = _load(self._model_dir, self._model_file, self._param_file)
        params = {k: t.array for k, t in model.params.items()}
        t1 = time.perf_counter()
        ops_before = sum(1 for b in model.program.blocks for op in b.ops if op.type not in ("feed", "fetch"))
        self._say(f"  {ops_before} ops, {len(params)} params ({1e3 * (t1 - t0):.0f} ms); "
                  f"running {len(passes)} passes for [{', '.join(p.target.name for p in self._places)}] ...")
        options = self._options
        if self.quant_model:  # weight-only quantization (paddle_lite_opt --quant_model --quant_type)
            from pdlite.optimizer.passes.weight_quant import with_weight_quantization

            passes, options = with_weight_quantization(list(passes)), {**options, "quant_type": self.quant_type}
        analysis = analyse(model.program, params, self.places_for_run(), passes, options)
        t2 = time.perf_counter()
        ops_after = len(analysis.graph.op_nodes())
        self._say(f"  {ops_after} ops after optimization ({1e3 * (t2 - t1):.0f} ms); writing {out} ...")
        dirname = os.path.dirname(out)
        if dirname:
            os.makedirs(dirname, exist_ok=True)
        if self._model_type == "naive_buffer":
            src = os.fspath(self._model_file or self._model_dir)
            nbytes = save_optimized_model(analysis, out, {"passes": list(passes), "source": os.path.basename(src)})
        else:
            out, nbytes = save_optimized_protobuf(analysis, out)
        t3 = time.perf_counter()
        warn_host_fallback(self._places, {i.kernel_def.key.target for i in analysis.runtime.instructions
                                          if i.kernel_def is not None})
        if self.record_info:
            write_model_info(analysis, out)
        self.last_report = dict(path=out, ops_before=ops_before, ops_after=ops_after, bytes=nbytes,
                                load_ms=1e3 * (t1 - t0), optimize_ms=1e3 * (t2 - t1), write_ms=1e3 * (t3 - t2))
        return out

    def run_optimize(self, model_dir: str = "", model_file: str = "", param_file: str = "",
                     type: str = "naive_buffer", valid_places: str | Sequence[Place] = "",  # noqa: A002
                     optimize_out: str = "", *, valid_targets: str | Sequence[Place] = "") -> str:
        """paddlelite's one-call form: run_optimize(model_dir, model_file, param_file, type, valid_places, out)."""
        if model_dir:
            self.set_model_dir(model_dir)
        if model_file:
            self.set_model_file(model_file)
        if param_file:
            self.set_param_file(param_file)
        self.set_model_type(type or "naive_buffer")
        if valid_places or valid_targets:
            self.set_valid_places(valid_places or valid_targets)
        if optimize_out:
            self.set_optimize_out(optimize_out)
        return self.run()

    # -- more paddlelite settings ---------------------------------------------------------------
    def enable_fp16(self) -> None:
        """fp16 kernels where pdlite has them (the CUDA and OpenCL targets); host kernels stay fp32."""
        self.fp16 = True

    def places_for_run(self) -> list[Place]:
        """The valid places, with fp16 ones put first for the CUDA / OpenCL places when enable_fp16() was called."""
        if not self.fp16:
            return list(self._places)
        if not any(p.target in FP16_TARGETS for p in self._places):
            warnings.warn("Opt.enable_fp16(): pdlite has fp16 kernels only on the CUDA and OpenCL targets; the valid "
                          f"places {self._places} run fp32", RuntimeWarning, stacklevel=3)
        return with_fp16_places(list(self._places))

    def set_quant_model(self, quant_model: bool) -> None:
        """Quantize the weights when optimizing (kind: set_quant_type)."""
        self.quant_model = bool(quant_model)

    def set_quant_type(self, quant_type: str) -> None:
        """"QUANT_INT8" or "QUANT_INT16" (paddle_lite_opt's --quant_type)."""
        if quant_type not in QUANT_TYPES:
            raise ConfigError(f"set_quant_type({quant_type!r}): expected one of {', '.join(QUANT_TYPES)}")
        self.quant_type = quant_type

    def set_sparse_model(self, sparse_model: bool) -> None:
        """Accepted (paddle_lite_opt --sparse_model): pdlite's kernels are dense; the flag is kept."""
        self.sparse_model = bool(sparse_model)

    def set_sparse_threshold(self, threshold: float) -> None:
        """paddlelite's sparse-conv threshold: stored; pdlite has no sparse kernels, so it changes nothing."""
        self.sparse_threshold = float(threshold)

    def record_model_info(self, record_strip_info: bool = True) -> None:
        """Also write the model's op types and picked kernels beside the output (.tailored_ops_list,
        .tailored_kernels_list), as paddle_lite_opt --record_tailoring_info does."""
        self.record_info = bool(record_strip_info)

    def set_modelset_dir(self, model_set_dir: str | os.PathLike) -> None:
        """paddle_lite_opt --model_set: optimize every model folder inside `model_set_dir` (run() writes
        `<optimize_out>/<folder name>.nb` for each)."""
        self._modelset_dir = os.fspath(model_set_dir)

    def _run_model_set(self) -> str:
        folder = self._modelset_dir
        if not os.path.isdir(folder):
            raise ConfigError(f"set_modelset_dir: {folder!r} is not a folder")
        out_dir = self._optimize_out or folder + "_opt"
        names = sorted(n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n)))
        if not names:
            raise ConfigError(f"set_modelset_dir: {folder!r} holds no model folders")
        saved = (self._model_dir, self._model_file, self._param_file, self._optimize_out, self._modelset_dir)
        try:
            self._modelset_dir = ""
            for n in names:
                self._model_dir, self._model_file, self._param_file = os.path.join(folder, n), "", ""
                self._optimize_out = os.path.join(out_dir, n)
                self.run()
        finally:
            self._model_dir, self._model_file, self._param_file, self._optimize_out, self._modelset_dir = saved
        return out_dir

    def print_all_ops_in_md_dormat(self) -> str:
        """paddlelite's (sic) markdown table of every op and its targets."""
        header, *rows = all_ops_table_rows()
        md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        md += ["| " + " | ".join(r) + " |" for r in rows]
        text = "\n".join(md) + "\n"
        print(text, end="")
        return text

    def visualize_optimized_nb_model(self, model_path: str, output_dir: str = "") -> None:
        """paddlelite's .nb drawing: raises ConfigError naming the CLI that draws it (`pdlite graph MODEL -o
        graph.svg`)."""
        raise ConfigError("Opt.visualize_optimized_nb_model(): draw it with the CLI instead: "
                          f"`pdlite graph {model_path} -o graph.svg` (or -o graph.dot)")

    def version(self) -> str:
        """pdlite's version string."""
        from pdlite import __version__

        return __version__

    def help(self) -> str:
        """Print a summary of the Opt methods and the CLI that does the same (paddlelite's opt.help())."""
        text = (f"pdlite {self.version()} Opt: set_model_dir / set_model_file + set_param_file, set_valid_places "
                "('x86,host'), set_optimize_out, set_model_type ('naive_buffer' | 'protobuf'), run(); "
                "print_all_ops, print_supported_ops, print_model_ops, check_if_model_supported, "
                "display_kernels_info. The CLI: pdlite-opt --help\n")
        print(text, end="")
        return text

    executablebin_help = help

    def check_if_model_supported(self, print_ops_info: bool = True) -> bool:
        """Whether every op of the configured model runs on the valid places (or the host fallback)."""
        report = self.model_ops()
        if print_ops_info:
            print(report.text(), end="")
        return not report.unsupported()

    def display_kernels_info(self) -> str:
        """Every registered kernel: op type and key (target/precision/layout/alias)."""
        load_kernels_of(None)
        _, kernels = _registries()
        rows = sorted([k.op_type, k.target.name, k.precision.name, k.layout.name, k.alias] for k in kernels)
        text = _table(["op_type", "target", "precision", "layout", "alias"], rows) + f"{len(rows)} kernels\n"
        print(text, end="")
        return text

    # -- what is supported --------------------------------------------------------------------
    def print_all_ops(self) -> str:
        """Print every op pdlite knows and the targets with kernels for it; returns the text."""
        text = all_ops_table()
        print(text, end="")
        return text

    def print_supported_ops(self) -> str:
        """Print the ops each valid place supports; returns the text."""
        text = supported_ops_text(self._places)
        print(text, end="")
        return text

    def model_ops(self, model: str | os.PathLike | None = None) -> ModelOpsReport:
        """Which of the model's ops (the model set, or `model`: a folder or program file) each valid place supports."""
        if model is not None:
            m = os.fspath(model)
            program = load_program(model_dir=m) if os.path.isdir(m) else load_program(model_file=m)
        else:
            program = load_program(self._model_dir, self._model_file, self._param_file)
        return model_ops_report(program, self._places)

    def print_model_ops(self, model: str | os.PathLike | None = None) -> str:
        """Which of the model's ops each target supports (model: a folder, a program file or a .nb)."""
        text = self.model_ops(model).text()
        print(text, end="")
        return text


# -- protobuf output ----------------------------------------------------------------------------

def save_optimized_protobuf(analysis: Any, out: str) -> tuple[str, int]:
    """Write the optimized program as `out.pdmodel` + `out.pdiparams` (feed/fetch ops put back).

    The program may hold pdlite's fused ops, so Paddle itself may not run it; pdlite loads it
    with CxxConfig (the passes then find little left to do). Kernel choices are not kept.
    """
    from pdlite.core.dtypes import VarType
    from pdlite.core.program import OpDesc, VarDesc
    from pdlite.model_parser import LoDTensor, save_model
    from pdlite.model_parser.naive_buffer import optimized_model

    m = optimized_model(analysis)
    program, params = m.program, m.params
    block = program.main
    block.vars = dict(block.vars)
    for n in params:  # a param a pass created without marking it persistable
        if n in block.vars and not block.vars[n].persistable:
            block.vars[n] = dataclasses.replace(block.vars[n], persistable=True)
    block.vars["feed"] = VarDesc("feed", VarType.FEED_MINIBATCH, None, persistable=True)
    block.vars["fetch"] = VarDesc("fetch", VarType.FETCH_LIST, None, persistable=True)
    feeds = [OpDesc("feed", {"X": ["feed"]}, {"Out": [n]}, {"col": i}) for i, n in enumerate(analysis.feed_names)]
    fetches = [OpDesc("fetch", {"X": [n]}, {"Out": ["fetch"]}, {"col": i}) for i, n in enumerate(analysis.fetch_names)]
    block.ops = [*feeds, *block.ops, *fetches]
    persistable = set(program.persistable_names())
    missing = sorted(persistable - set(params))
    if missing:
        raise ModelFormatError(f"cannot write the optimized program as protobuf: persistable vars {missing[:5]} "
                               "have no value after optimization")
    tensors = {n: LoDTensor(params[n]) for n in persistable}
    model_path, params_path = out + ".pdmodel", out + ".pdiparams"
    save_model(program, tensors, model_path, params_path)
    return model_path, os.path.getsize(model_path) + os.path.getsize(params_path)
