"""after_import(module, fn): run fn(module) once that module has been imported, by whoever imports it.

mytorch adapts a few libraries it must not import itself at `import mytorch` (Dynamo's device interface,
transformers' experts registry, accelerate's device choice): importing them costs seconds and most programs never
do. Each adaptation is registered here; it runs at once when the module is already imported, else right after
the module's own code has run (a meta path finder that wraps the module's loader), so that the adaptation is in
place before the importer sees the module.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from typing import Callable

_pending: dict[str, list[Callable]] = {}
_lock = threading.Lock()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        with _lock:
            callbacks = _pending.pop(fullname, [])
        if not callbacks:
            return None
        spec = None
        for finder in sys.meta_path:  # the spec the import would have found without us
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_adapt(module):
            exec_module(module)
            for fn in callbacks:
                fn(module)

        spec.loader.exec_module = exec_then_adapt
        return spec


_finder = _Finder()


def after_import(name: str, fn: Callable) -> None:
    """fn(module) now if `name` is imported, else right after it is (once)."""
    module = sys.modules.get(name)
    if module is not None:
        fn(module)
        return
    with _lock:
        _pending.setdefault(name, []).append(fn)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
