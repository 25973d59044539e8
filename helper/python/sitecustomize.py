# dist-train: put on the PYTHONPATH of a --dist-train task by the plugin.
#
# PyTorch 2.4 and later ask for the libuv TCPStore by default, and fail
# when they were built without libuv ("use_libuv was requested but
# PyTorch was build without libuv support"), as Debian 13's torch 2.6 and
# unstable's 2.14 are. USE_LIBUV=0 reaches init_process_group's env://
# store only; torchrun's agent and workers make theirs without reading it.
# So this module lets a TCPStore that fails for want of libuv be made
# again without it, and changes nothing where torch has libuv, or where
# torch.distributed is never imported. It then runs the sitecustomize it
# hides, if any.
import sys


def _compat_store(original):
    class TCPStore(original):
        __doc__ = original.__doc__

        def __init__(self, *args, **kwargs):
            try:
                super().__init__(*args, **kwargs)
            except Exception as e:  # RuntimeError, DistStoreError
                if "libuv" not in str(e) or kwargs.get("use_libuv") is False:
                    raise
                kwargs["use_libuv"] = False
                super().__init__(*args, **kwargs)

    TCPStore.__name__ = TCPStore.__qualname__ = original.__name__
    TCPStore.__module__ = original.__module__
    return TCPStore


_stores = {}


def _patch(module):
    store = getattr(module, "TCPStore", None)
    if not isinstance(store, type) or store in _stores.values():
        return
    if getattr(store, "__module__", "") != "torch._C._distributed_c10d":
        return
    if store not in _stores:
        _stores[store] = _compat_store(store)
    module.TCPStore = _stores[store]


class _TorchDistributedFinder:
    """Patch each torch.distributed module once it has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.distributed" and not name.startswith("torch.distributed."):
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


def _run_hidden_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if not any(isinstance(f, _TorchDistributedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchDistributedFinder())
_run_hidden_sitecustomize()
