"""The package's import graph has no cycles, between modules or between
packages and subpackages (function-level imports included), imports run
downward, and no task kind's folder imports another's."""

import ast
import functools
import gc
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "bert_tf"


def module_paths():
    """{module name: path} of every module of the package."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


@functools.lru_cache(maxsize=None)
def import_graph():
    """{module: set of bert_tf modules it imports anywhere in its file}.

    Parsed once, with the garbage collector off: in a test process that
    holds many TF graphs, the collections the AST nodes trigger scan that
    whole heap (40 s in `make test`, 0.2 s alone)."""
    gc.disable()
    try:
        return _import_graph()
    finally:
        gc.enable()


def _import_graph():
    modules = module_paths()
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.add(node.module)
                targets.update(f"{node.module}.{a.name}" for a in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph):
    """Strongly connected components of more than one module."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.add(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]]


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 40 and graph["bert_tf.tasks.span_qa"]
    assert cycles(graph) == []


def package_graph(graph, packages):
    """The module graph folded onto packages: a module inside a
    subpackage counts as its package (a package's `__init__` is the
    package); the top-level modules stay themselves."""
    def unit(module):
        if module in packages or module.count(".") < 2:
            return module
        return module.rpartition(".")[0]

    folded = {}
    for source, targets in graph.items():
        edges = folded.setdefault(unit(source), set())
        edges.update(unit(t) for t in targets if unit(t) != unit(source))
    return folded


def test_package_cycle_finder_sees_subpackages():
    packages = {"bert_tf.data", "bert_tf.data.readers"}
    graph = {"bert_tf.data.documents": {"bert_tf.data.readers.sentiment"},
             "bert_tf.data.readers.swag": {"bert_tf.data.documents"},
             "bert_tf.data.readers.sentiment": set()}
    assert cycles(graph) == []
    assert cycles(package_graph(graph, packages)) == [
        ["bert_tf.data", "bert_tf.data.readers"]]


def test_no_cycles_between_packages():
    packages = {name for name, path in module_paths().items()
                if path.name == "__init__.py"}
    assert {"bert_tf.tasks", "bert_tf.tasks.span_qa"} <= packages
    assert cycles(package_graph(import_graph(), packages)) == []


def test_no_task_kind_imports_another():
    """A kind is one folder: it builds on `tasks/base.py`, `tasks/
    batching.py` and the shared layers below, never on another kind."""
    kinds = {name for name, path in module_paths().items()
             if path.name == "__init__.py" and
             name.startswith("bert_tf.tasks.")}

    def kind_of(module):
        return next((k for k in kinds if module == k or
                     module.startswith(k + ".")), None)

    assert len(kinds) >= 6
    found = [f"{source} -> {target}"
             for source, targets in import_graph().items()
             for target in targets
             if kind_of(source) and kind_of(target) and
             kind_of(source) != kind_of(target)]
    assert found == []


# The layers of docs/architecture.md, bottom up; a module imports only from its own
# layer or below. Checkpoints read and write models; training (the loops)
# checkpoints them; tasks build on models and checkpoints and know nothing
# of training; serving writes and runs the tasks' exports and imports
# nothing that trains. `finetune` and `pretrain` run tasks, training and
# checkpoints, `distill` runs a fine-tuning run with a teacher, the CLI
# runs everything (the demo lives in examples/, outside the package).
LAYERS = [
    {"config", "config_model", "config_runs", "config_io", "presets", "text", "layers", "losses", "storage",
     "safe_io", "precision", "keras_compat", "progress", "hf_hub", "_moved"},
    {"models", "data", "samples", "sources", "formats"},
    {"checkpoints"},
    {"training", "tasks"},
    {"serving"},
    {"finetune", "pretrain"},
    {"distill"},
    {"cli"},
]
# Within a layer, or across layers, these know nothing of each other.
APART = {("data", "models"), ("models", "data"), ("training", "tasks"),
         ("tasks", "training"), ("serving", "training"), ("serving", "data")}


def _group(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # None: the package root


def layer_violations(graph):
    level = {name: i for i, names in enumerate(LAYERS) for name in names}
    found = []
    for source, targets in graph.items():
        for target in targets:
            a, b = _group(source), _group(target)
            if a is None or b is None or a == b:
                continue
            if level[b] > level[a] or (a, b) in APART:
                found.append(f"{source} -> {target}")
    return sorted(found)


def test_layer_finder_finds_an_upward_import():
    graph = {"bert_tf.checkpoints.native": {"bert_tf.training.trainer"},
             "bert_tf.data.x": {"bert_tf.models.encoder"},
             "bert_tf.tasks.y": {"bert_tf.models.encoder"},
             "bert_tf.serving.z": {"bert_tf.training.checkpoints"},
             "bert_tf.tasks.w": {"bert_tf.serving.export"}}
    assert layer_violations(graph) == [
        "bert_tf.checkpoints.native -> bert_tf.training.trainer",
        "bert_tf.data.x -> bert_tf.models.encoder",
        "bert_tf.serving.z -> bert_tf.training.checkpoints",
        "bert_tf.tasks.w -> bert_tf.serving.export"]


def test_the_layers_refuse_the_imports_of_the_old_layout():
    """Before the precision module, the checkpoint package and the serving
    layer were set apart, serving imported training twice."""
    graph = {"bert_tf.serving.precision": {"bert_tf.training.precision"},
             "bert_tf.serving.integrity": {
                 "bert_tf.training.checkpoint_io"}}
    assert len(layer_violations(graph)) == 2


def test_imports_run_downward_only():
    graph = import_graph()
    groups = {_group(m) for m in graph} - {None}
    assert groups <= set().union(*LAYERS), \
        f"place {groups - set().union(*LAYERS)} in LAYERS"
    assert layer_violations(graph) == []


# Exact kind names a module outside tasks/ may hold: the embedding layer's
# own name, which is not the kind.
KIND_NAME_USES = {("models/encoder.py", "embeddings")}


def test_no_kind_is_named_outside_its_folder():
    """Outside `tasks/`, the public API facade (`__init__.py`) and the
    shims of old names (`_moved.py`), no code holds a kind's name: the
    export routes, flags and TFLite runner ask the registry."""
    kinds = {p.name for p in (PACKAGE / "tasks").iterdir()
             if (p / "__init__.py").is_file()}
    found = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("tasks/") or relative in ("__init__.py",
                                                         "_moved.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in kinds and \
                    (relative, node.value) not in KIND_NAME_USES:
                found.append(f"{relative}:{node.lineno} {node.value!r}")
    assert found == []
