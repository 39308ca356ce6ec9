"""`bert-tf convert`: a foreign checkpoint (HF, TF1, Model Garden) into a
bert_tf checkpoint directory."""


from bert_tf import sources
from bert_tf.formats.canonical import assign_weights
from bert_tf.checkpoints.garden import read_garden
from bert_tf.formats.hf import check_tokenizer_json, read_hf
from bert_tf.formats.files import checkpoint_prefix, find_vocab
from bert_tf.checkpoints.native import (Pretrained, check_vocab_size,
                                        load_pretrained, restore_model,
                                        save_pretrained)
from bert_tf.formats.tf1 import read_tf1
from bert_tf.config import load_config
from bert_tf.config_io import (CHECKPOINT_SOURCES, CONFIG_FILE, VOCAB_FILE,
                               WEIGHTS_PREFIX)
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.storage import GPath
from bert_tf.text.vocab import read_vocab

READERS = dict(zip(CHECKPOINT_SOURCES, (read_hf, read_tf1, read_garden)))
SOURCES = CHECKPOINT_SOURCES


def _checked_vocab(source, input_path, config, vocab_path=None):
    """The vocab of a foreign checkpoint (given, or found beside it),
    checked against its embedding's rows and, for HF, its tokenizer.json."""
    vocab_path = GPath(vocab_path) if vocab_path else find_vocab(input_path)
    vocab = read_vocab(vocab_path)
    if source == "hf":
        path = GPath(input_path)
        check_tokenizer_json(vocab, vocab_path,
                             path if path.is_dir() else path.parent)
    check_vocab_size(vocab, config, vocab_path)
    return vocab


def convert(source, input_path, output_dir, vocab_path=None, log=print):
    """Converts a foreign checkpoint into a bert_tf checkpoint directory.

    Args:
        source: `hf`, `tf1` or `garden`; None for a name.
        input_path: the checkpoint (see `read_hf`, `read_tf1`,
            `read_garden`), or a name (`hf://ORG/NAME[@REVISION]`, a
            preset with weights, `sample:NAME`: `bert_tf.sources`).
        output_dir: where config.yaml, vocab.txt and model.ckpt.* go.
        vocab_path: vocab.txt (default: found next to the input).
        log: where progress lines go.

    Returns:
        a `Pretrained` with the converted models.
    """
    if source is None or sources.is_name(input_path):
        layout, _, path = sources.resolve(input_path, log).partition(":")
        if source is None and not (layout in READERS and path):
            if not sources.is_name(input_path) and \
                    not GPath(input_path).exists():
                raise FileNotFoundError(f"--input {input_path} does not "
                                        "exist.")
            raise ValueError(
                f"{input_path}: name its format with --from "
                f"({', '.join(SOURCES)}), or give a checkpoint name "
                "(hf://ORG/NAME, a preset with weights, sample:NAME).")
        if path:
            source, input_path = layout, path
    if source not in READERS:
        raise ValueError(f"Unknown checkpoint source {source!r}; choose one "
                         f"of {', '.join(SOURCES)}.")
    config, weights, ignored = READERS[source](input_path)
    vocab = _checked_vocab(source, input_path, config, vocab_path)
    encoder = BertEncoder.from_config_object(config)
    pretrainer = None
    if "cls/predictions/output_bias" in weights:
        pretrainer = BertPretrainer(
            encoder, nsp="cls/seq_relationship/output_bias" in weights)
        assign_weights(weights, encoder, pretrainer.masked_lm,
                       pretrainer.next_sentence, source=str(input_path))
    else:
        assign_weights(weights, encoder, source=str(input_path))
    if ignored:
        log(f"Ignored {len(ignored)} variable(s) that are not part of BERT: "
            f"{', '.join(ignored[:8])}{' ...' if len(ignored) > 8 else ''}")
    written = save_pretrained(output_dir, encoder, vocab, pretrainer)
    heads = ("encoder + masked-LM head" +
             (" + NSP head" if pretrainer and pretrainer.nsp else "")
             if pretrainer else "encoder")
    log(f"Converted {source} checkpoint {input_path} ({heads}, "
        f"L={config.num_layers} H={config.hidden_size} A={config.num_heads}, "
        f"{encoder.count_params():,} encoder parameters)")
    for path in written:
        log(f"  wrote {path}")
    return Pretrained(config, vocab, encoder, pretrainer, GPath(output_dir))


def load_encoder(spec, dtype=None):
    """The encoder (no heads) and vocab that a checkpoint spec names.

    Args:
        spec: a name (`hf://ORG/NAME[@REV]`, a preset with weights such as
            `bert_base_uncased`, `sample:NAME`: `bert_tf.sources`),
            `hf:PATH`, `tf1:PATH` or `garden:PATH` (read directly, vocab
            next to it), or a bert_tf directory: `bert-tf convert` output
            or a pre-training run's model_dir (its latest checkpoint).
        dtype: dtype policy of the built encoder.

    Returns:
        a `Pretrained` (pretrainer None).
    """
    source, _, rest = str(sources.resolve(spec)).partition(":")
    if source in READERS and rest:
        path = GPath(rest).expanduser()
        config, weights, _ = READERS[source](path)
        vocab = _checked_vocab(source, path, config)
        encoder = BertEncoder.from_config_object(config, dtype=dtype)
        assign_weights(weights, encoder, source=str(path))
        return Pretrained(config, vocab, encoder, None, path)
    directory = GPath(spec).expanduser()
    if not (directory / "checkpoints").is_dir():
        return load_pretrained(directory, with_heads=False, dtype=dtype)
    config, vocab_path, prefix = checkpoint_files(directory)
    vocab = read_vocab(vocab_path)
    check_vocab_size(vocab, config, vocab_path)
    encoder = BertEncoder.from_config_object(config, dtype=dtype)
    restore_model(prefix, encoder)
    return Pretrained(config, vocab, encoder, None, directory)


def checkpoint_files(directory):
    """(encoder config, vocab path, weights prefix) of a bert_tf checkpoint
    directory: `bert-tf convert` output, or a pre-training run's model_dir
    (its latest checkpoint)."""
    directory = GPath(directory)
    weights = directory / "checkpoints" if (directory /
                                            "checkpoints").is_dir() \
        else directory
    return (load_config(directory / CONFIG_FILE).encoder,
            directory / VOCAB_FILE,
            checkpoint_prefix(weights, (WEIGHTS_PREFIX,)))
