"""Loaded by the Python processes the suite starts (conftest puts this
directory on their PYTHONPATH): Keras's optional imports of packages that
only the test, garden and demo extras install are not made, as in a base
install (`pip install -e .`). Keras tries `sklearn`, `matplotlib.pyplot`,
`pandas` and `cv2` at import; here they cost 2.2 of the 6 CPU-seconds of
each `import tensorflow`. An import of them by any other module still
works."""

import sys

EXTRAS_ONLY = frozenset({"sklearn", "matplotlib", "pandas", "cv2"})


def _importer():
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("importlib", __name__)):
            return name
        frame = frame.f_back
    return ""


class _KerasOptionalImports:
    def find_spec(self, name, path=None, target=None):
        if (name.partition(".")[0] in EXTRAS_ONLY
                and _importer().startswith("keras.")):
            raise ModuleNotFoundError(f"No module named {name!r} (as in "
                                      "a base install)", name=name)
        return None


sys.meta_path.insert(0, _KerasOptionalImports())
