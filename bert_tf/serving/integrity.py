"""What is wrong with an export that does not load: the damaged or
missing file, named in one line instead of a deep loader traceback."""

from bert_tf.safe_io import StorageError
from bert_tf.storage import GPath
from bert_tf.checkpoints.run_files import files_of, read_error


def find_damage(path, read_variables=True):
    """The first missing or damaged file of SavedModel `path`, as a phrase
    naming it (None if every file reads). Without `read_variables` only
    the files' presence and the graph are checked (fast, before a load)."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    path = GPath(path)
    graph = path / "saved_model.pb"
    if not graph.is_file():
        return f"{graph} is missing"
    try:
        proto = saved_model_pb2.SavedModel.FromString(graph.read_bytes())
    except DecodeError:
        return f"{graph} is damaged (it does not parse)"
    for meta_graph in proto.meta_graphs:
        for asset in meta_graph.asset_file_def:
            file = path / "assets" / asset.filename
            if not file.is_file():
                return f"{file} is missing (the model reads it on load)"
    prefix = path / "variables" / "variables"
    if not GPath(str(prefix) + ".index").is_file():
        return f"{prefix}.index is missing"
    reason = read_error(prefix) if read_variables else None
    if reason:
        names = ", ".join(p.name for p in files_of(prefix))
        return f"the variables in {prefix.parent} do not read ({names}: " \
               f"{reason})"
    return None


def check_export_files(path):
    """Raises the one-line error if a file of export `path` is missing
    (an export copied in part) or its graph does not parse."""
    problem = find_damage(path, read_variables=False)
    if problem:
        raise broken_export_error(path, None, problem)


def broken_export_error(path, error, problem=None):
    """The one-line error of export `path` that failed to load with
    `error`."""
    problem = problem or find_damage(path)
    if problem is None:
        text = getattr(error, "message", None) or str(error)
        problem = f"{type(error).__name__}: " \
                  f"{(text.strip().splitlines() or [''])[0][:200]}"
    return StorageError(f"cannot load the export {path}: {problem}. Export "
                        "it again (`bert-tf export`), or copy the whole "
                        "version directory again.")


__all__ = ["broken_export_error", "check_export_files", "find_damage"]
