"""The notebooks of examples/notebooks/ run top to bottom, with small
settings put into their `parameters` cell (as papermill would)."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "quickstart": 'TRAIN_EXAMPLES = 96\nEVAL_EXAMPLES = 64\nEPOCHS = 1\n'
                  'SEQ_LENGTH = 32\nFREEZE_LAYERS = 5\nLEARNING_RATE = 1e-3\n'
                  'OUT = "quickstart_out"',
    "question_answering": 'OVERRIDES = ["epochs=0", "trainer.train_steps=6", '
                          '"trainer.steps_per_loop=3", "freeze_layers=5", '
                          '"seq_length=64", "batch_size=8", '
                          '"trainer.eval_every=6"]\n'
                          'CONTEXT_TWEETS = 40\nOUT = "qa_out"',
    "pretraining": 'STEPS = 10\nSEQ_LENGTH = 64\nBATCH_SIZE = 8\n'
                   'VALIDATION_STEPS = 2\nOUT = "pretraining_out"',
    "tf_hub": 'TRAIN_EXAMPLES = 32\nEPOCHS = 1\nSEQ_LENGTH = 32\n'
              'TEST_EXAMPLES = 64\nOUT = "hub_out"',
}
EXPECTED = {
    "quickstart": ["test accuracy", "negative", "wrote SavedModel"],
    "question_answering": ["words", "Which location is mentioned?"],
    "pretraining": ["epoch_mlm_accuracy", "input_word_ids"],
    "tf_hub": ["test accuracy", "[[0 0 0"],
}


def _outputs(notebook):
    text = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text.append(output.get("text", "") or
                        output.get("data", {}).get("text/plain", ""))
    return "\n".join(text)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_notebook_runs(name, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    path = ROOT / "examples" / "notebooks" / f"{name}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    committed = _outputs(notebook)
    for word in EXPECTED[name]:  # what the committed real run printed
        assert word in committed, (name, word)
    parameters = [c for c in notebook.cells
                  if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1
    parameters[0].source = SMALL[name]
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = _outputs(notebook)
    for word in EXPECTED[name]:
        assert word in printed, (name, word, printed[-2000:])
