"""Entry point for PyTorch's backend autoload (group ``torch.backends``).

It lives outside the ``mytorch`` package on purpose: importing a package's submodule runs the package's
``__init__`` first, and a broken or unbuilt mytorch must never make ``import torch`` fail.
"""

import warnings


def load():
    try:
        import mytorch  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - depends on the installation; never break `import torch`
        warnings.warn(
            f"mytorch is installed but could not be loaded, so the 'mytorch' device is unavailable "
            f"(torch will answer 'Expected one of cpu, cuda, ... device type' for it): {exc}",
            stacklevel=2,
        )
