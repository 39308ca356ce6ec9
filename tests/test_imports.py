"""The package's import graph has no cycles (function-level imports
included)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "bert_tf"


def import_graph():
    """{module: set of bert_tf modules it imports anywhere in its file}."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
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


# ARCHITECTURE.md's layers, bottom up; a module imports only from its own
# layer or below. `finetune` and `pretrain` run tasks and checkpoints, the
# CLI and the demo run everything.
LAYERS = [
    {"config", "config_io", "presets", "text", "layers", "training",
     "losses", "storage"},
    {"models", "data"},
    {"tasks", "checkpoints", "serving"},
    {"finetune", "pretrain"},
    {"cli", "demo"},
]
# Within a layer, these know nothing of each other.
APART = {("data", "models"), ("models", "data")}


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
    graph = {"bert_tf.training.trainer": {"bert_tf.checkpoints.native"},
             "bert_tf.data.x": {"bert_tf.models.encoder"},
             "bert_tf.tasks.y": {"bert_tf.models.encoder"}}
    assert layer_violations(graph) == [
        "bert_tf.data.x -> bert_tf.models.encoder",
        "bert_tf.training.trainer -> bert_tf.checkpoints.native"]


def test_imports_run_downward_only():
    graph = import_graph()
    groups = {_group(m) for m in graph} - {None}
    assert groups <= set().union(*LAYERS), \
        f"place {groups - set().union(*LAYERS)} in LAYERS"
    assert layer_violations(graph) == []
