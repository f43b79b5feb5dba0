"""Load a topology script: a Python file whose ``topology(**params)`` returns a Topology.

Parameters come from the command line or an experiment file as strings or YAML values and
are converted to the type of the function's default (``hops=3`` -> int).
"""

from __future__ import annotations

import inspect
import re
import traceback
from pathlib import Path
from typing import Any, Callable

from quicbed.errors import SpecError
from quicbed.spec.pyfile import module_from_file
from quicbed.spec.resolve import SpecErrors
from quicbed.spec.topology import Topology

ENTRY_POINT = "topology"


def split_reference(reference: str) -> tuple[Path, str]:
    """'topologies/dumbbell.py' or 'topologies/dumbbell.py:lossy' -> (path, function name)."""
    path, _, function = reference.partition(".py:")
    if function:
        return Path(path + ".py"), function
    return Path(reference), ENTRY_POINT


def _import(path: Path) -> Any:
    if path.is_dir():
        raise SpecError(
            "is a folder, not a Python file",
            source=str(path),
            fix="give the path of a topology script, e.g. topologies/dumbbell.py",
        )
    if not path.is_file():
        raise SpecError(
            "topology file not found",
            source=str(path),
            fix="give the path of a Python file, e.g. topologies/dumbbell.py",
        )
    module_name = f"quicbed_topology_{abs(hash(path.resolve()))}"
    try:
        module = module_from_file(path, module_name)
    except SpecError as error:
        raise error.located(_script_location(path, error)) from None
    except SyntaxError as error:
        raise SpecError(f"syntax error: {error.msg}", source=f"{path}:{error.lineno}") from None
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure of user code is reported with its place
        raise _failure(path, error) from None
    if module is None:
        raise SpecError("not a Python file", source=str(path))
    return module


def _failure(path: Path, error: BaseException) -> SpecError:
    """A script's exception (or its sys.exit(), which must not end quicbed) as a SpecError."""
    if isinstance(error, SystemExit):
        return SpecError(
            f"SystemExit: the script called sys.exit({error.code!r})",
            source=_script_location(path, error),
            fix="raise an exception (e.g. ValueError) to refuse parameters; a script must not exit",
        )
    return SpecError(f"{type(error).__name__}: {error}", source=_script_location(path, error))


def _script_location(path: Path, error: BaseException) -> str:
    """'file.py:LINE' of the deepest frame of the traceback that lies in the script."""
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if Path(frame.filename).resolve() == path.resolve():
            line = frame.lineno
    return f"{path}:{line}" if line else str(path)


def topology_function(reference: str) -> tuple[Path, Callable[..., Topology]]:
    path, name = split_reference(reference)
    module = _import(path)
    function = getattr(module, name, None)
    if not callable(function):
        raise SpecError(
            f"no function {name}() in the file",
            source=str(path),
            fix=f"define 'def {name}(...) -> Topology' (or name another with FILE.py:FUNCTION)",
        )
    return path, function


def parameters(reference: str) -> dict[str, Any]:
    """The script's parameters and their defaults."""
    _, function = topology_function(reference)
    return {name: p.default for name, p in inspect.signature(function).parameters.items()}


def applied_parameters(reference: str, given: dict[str, Any]) -> dict[str, Any]:
    """The values the script runs with: its defaults, with ``given`` converted over them
    (a value the loader accepted; call load_topology first for its errors)."""
    values = parameters(reference)
    for key, value in given.items():
        values[key] = convert(value, values.get(key))
    return values


def convert(value: Any, default: Any) -> Any:
    """Turn a command-line string into the type of the parameter's default. A value in braces
    or brackets is read as YAML, as the experiment file would hold it: ``-p 'loss={gemodel:
    {p: 1, r: 30}}'`` gives the script the same mapping as ``params: {loss: {gemodel: ...}}``."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        import yaml

        try:
            return yaml.safe_load(value)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at character {mark.column + 1}" if mark is not None else ""
            raise ValueError(f"{value!r} is not a YAML mapping or list{where}") from None
    if not isinstance(value, str) or default is None or isinstance(default, str):
        return value
    if isinstance(default, bool):
        lowered = value.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(default, (int, float)):
        # "2%" is 2: numeric percentages (loss) are written in percent throughout quicbed
        number = value.strip()[:-1].strip() if isinstance(default, float) and value.strip().endswith("%") else value
        try:
            return type(default)(number)
        except ValueError:
            try:
                return float(number)
            except ValueError:
                raise ValueError(f"expected a number, got {value!r}") from None
    return value


def load_topology(reference: str, params: dict[str, Any] | None = None) -> Topology:
    """Run the script's topology function with ``params``; errors name the file and line."""
    path, function = topology_function(reference)
    signature = inspect.signature(function)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    kwargs: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key not in signature.parameters and not accepts_any:
            accepted = ", ".join(f"{n}={p.default!r}" for n, p in signature.parameters.items()) or "none"
            raise SpecError(
                f"unknown parameter {key!r}",
                source=str(path),
                field=f"params.{key}",
                fix=f"the script accepts: {accepted}",
            )
        default = signature.parameters[key].default if key in signature.parameters else None
        try:
            kwargs[key] = convert(value, None if default is inspect.Parameter.empty else default)
        except ValueError as error:
            raise SpecError(
                str(error), source=str(path), field=f"params.{key}", fix=f"give a value like the default {default!r}"
            ) from None
    try:
        topo = function(**kwargs)
    except SpecError as error:
        raise _from_parameter(error, params or {}, kwargs).located(_script_location(path, error)) from None
    except (Exception, SystemExit) as error:  # noqa: BLE001
        raise _failure(path, error) from None
    if not isinstance(topo, Topology):
        raise SpecError(
            f"{function.__name__}() returned {type(topo).__name__}, not a Topology",
            source=str(path),
            fix="end the function with 'return topo'",
        )
    try:
        topo.resolve()
    except SpecErrors as errors:
        raise SpecErrors([error.located(_defined_at(topo, path, error.field)) for error in errors.errors]) from None
    except SpecError as error:
        raise error.located(_defined_at(topo, path, error.field)) from None
    return topo


def _from_parameter(error: SpecError, given: dict[str, Any], values: dict[str, Any]) -> SpecError:
    """The error, saying so when the value it refuses is a parameter given to the script (-p or an
    experiment's params): the script's line only used it."""
    for key in given:
        value = values[key]
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and repr(value) in error.message:
            return SpecError(
                f"the parameter {key}={given[key]!r} given to the script: {error.message}",
                field=error.field,
                fix=error.fix,
                source=error.source,
            )
    return error


def _defined_at(topo: Topology, path: Path, field: str) -> str:
    """'file.py:LINE' of the script line that added the node or link a check refused."""
    match = re.match(r"(nodes|links)\[[^\]]+\]", field)
    place = topo.defined_at.get(match.group(0)) if match else None
    if place and Path(place[0]).resolve() == path.resolve():
        return f"{path}:{place[1]}"
    return str(path)
