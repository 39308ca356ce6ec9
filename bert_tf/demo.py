"""`make demo`: the guided tour of what bert_tf does so far.

1. Builds the paper's BERT-Base and BERT-Large and counts their parameters.
2. Fetches the real all-MiniLM-L6-v2 weights, imports them with the HF
   importer and checks tokens and outputs against the independent PyTorch
   reference fixture (tests/fixtures, written by
   scripts/make_reference_fixtures.py).
3. Uses the imported encoder for something real: sentence similarity.
4. Imports AntiBERTy's real masked-LM head and checks its logits.
5. Pre-trains BERT-Tiny on the real sample corpus for a few minutes
   (learned vocab, sentence pairs with held-out documents, the trainer)
   and prints held-out masked-LM and NSP accuracy.
"""

import collections
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, presets
from bert_tf.data import samples
from bert_tf.models.encoder import BertEncoder
from bert_tf.text.preprocessor import BertPreprocessor

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def _section(title):
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def parameter_counts():
    _section("Parameter counts")
    print(f"{'preset':<20} {'L/H/A':>12} {'from config':>13} "
          f"{'built model':>13}")
    for name in presets.available():
        cfg = presets.load_preset(name)
        built = ""
        if name in ("bert_base", "bert_large"):
            model = BertEncoder.from_config_object(cfg)
            built = f"{model.count_params():,}"
            del model
        shape = f"{cfg.num_layers}/{cfg.hidden_size}/{cfg.num_heads}"
        print(f"{name:<20} {shape:>12} {cfg.num_parameters():>13,} "
              f"{built:>13}")
    print("Paper: BERT-Base 109,482,240 and BERT-Large 335,141,888.")


def minilm_parity(output_dir):
    _section("Real weights: all-MiniLM-L6-v2 through the HF importer")
    source = samples.fetch("minilm", log=print)
    start = time.time()
    pretrained = checkpoints.convert("hf", source, output_dir / "minilm")
    print(f"converted in {time.time() - start:.1f} s")
    reference = np.load(FIXTURES / "minilm_reference.npz")
    sentences = [str(s) for s in reference["sentences"]]
    length = reference["input_word_ids"].shape[1]
    preprocessor = BertPreprocessor(pretrained.vocab, sequence_length=length)
    inputs = preprocessor(tf.constant(sentences))
    outputs = pretrained.encoder(inputs)
    ids_equal = (inputs["input_word_ids"].numpy() ==
                 reference["input_word_ids"]).all(axis=1)
    mask = reference["input_mask"][..., None]
    seq_delta = np.abs((outputs["sequence_output"].numpy() -
                        reference["sequence_output"]) * mask).max()
    pooled_delta = np.abs(outputs["pooled_output"].numpy() -
                          reference["pooled_output"]).max()
    print(f"reference: HF transformers {reference['transformers_version']} "
          f"(PyTorch {reference['torch_version']}), Python BERT tokenizer")
    print(f"token ids identical on {ids_equal.sum()}/{len(sentences)} "
          "sentences (incl. accents, numbers, CJK, emoji, empty, truncated)")
    print(f"max |delta| sequence_output {seq_delta:.2e}, pooled_output "
          f"{pooled_delta:.2e} (target <= 1e-4)")
    return pretrained, preprocessor


def sentence_similarity(pretrained):
    _section("Using it: sentence similarity (mean-pooled MiniLM)")
    sentences = ["A man is playing a guitar.",
                 "Someone strums an acoustic guitar on stage.",
                 "The stock market fell sharply on Monday.",
                 "Shares dropped steeply at the start of the week."]
    preprocessor = BertPreprocessor(pretrained.vocab, sequence_length=32)
    inputs = preprocessor(tf.constant(sentences))
    hidden = pretrained.encoder(inputs)["sequence_output"]
    mask = tf.cast(inputs["input_mask"], tf.float32)[..., None]
    embeddings = tf.math.l2_normalize(
        tf.reduce_sum(hidden * mask, 1) / tf.reduce_sum(mask, 1), axis=-1)
    similarity = tf.matmul(embeddings, embeddings, transpose_b=True).numpy()
    for i, sentence in enumerate(sentences):
        print(f"{sentence:<52} " + " ".join(f"{v:5.2f}"
                                            for v in similarity[i]))


def antiberty_parity(output_dir):
    _section("Real masked-LM head: AntiBERTy (PyTorch .bin, read "
             "without torch)")
    source = samples.fetch("antiberty", log=print) / "AntiBERTy_md_smooth"
    pretrained = checkpoints.convert("hf", source, output_dir / "antiberty")
    reference = np.load(FIXTURES / "antiberty_reference.npz")
    logits = pretrained.pretrainer(
        {k: reference[k] for k in ("input_word_ids", "input_mask",
                                   "input_type_ids", "masked_lm_positions")}
    )["mlm_logits"].numpy()
    delta = np.abs(logits - reference["mlm_logits"]).max()
    agree = (logits.argmax(-1) == reference["mlm_logits"].argmax(-1)).mean()
    print(f"masked-position logits max |delta| {delta:.2e} (target <= 1e-3); "
          f"top-1 predictions agree on {agree:.0%}")


def pretraining(output_dir, steps=1500):
    _section("Pre-training BERT-Tiny on the sample corpus (Wikipedia + Lee)")
    from bert_tf import pretrain
    from bert_tf.data import documents, pairs
    from bert_tf.data.pretraining import pretraining_dataset
    from bert_tf.text.tokenizer import BertTokenizer
    from bert_tf.text.vocab import learn_vocab, read_vocab

    data_dir = output_dir / "tfrecords"
    vocab_path = data_dir / "sample_vocab.txt"
    docs, stats = documents.load_documents(["sample:wikipedia",
                                            "sample:lee"])
    print(f"{stats.documents} documents, {stats.sentences:,} sentences")
    if not vocab_path.is_file():
        start = time.time()
        data_dir.mkdir(parents=True, exist_ok=True)
        learn_vocab((s for d in docs for s in d), 8000).save(vocab_path)
        print(f"learned an 8,000-piece vocab in {time.time() - start:.0f} s "
              f"-> {vocab_path}")
    vocab = read_vocab(vocab_path)
    pairs.write_pairs(docs, BertTokenizer(vocab), data_dir / "sample",
                      dupe_factor=10, seed=0, workers=2, eval_share=0.05)
    config = Path(__file__).resolve().parents[1] / "configs" / "pretrain" / \
        "sample_cpu.yaml"
    cfg = pretrain.load(config, [
        f"data.train_files={data_dir / 'sample'}",
        f"data.eval_files={data_dir / 'sample' / 'eval'}",
        f"data.vocab={vocab_path}", f"trainer.train_steps={steps}",
        f"optimizer.decay_steps={steps}", f"trainer.checkpoint_every={steps}",
        "trainer.eval_every=0", f"trainer.model_dir={output_dir / 'pretrain'}"])
    start = time.time()
    results = pretrain.run(cfg)
    counts = collections.Counter()
    for batch in pretraining_dataset(data_dir / "sample" / "eval", vocab, 32,
                                     seed=1).take(20):
        counts.update(batch["masked_lm_ids"].numpy()[
            batch["masked_lm_weights"].numpy() > 0].tolist())
    token, count = counts.most_common(1)[0]
    print(f"held-out after {steps} steps ({time.time() - start:.0f} s): "
          f"masked-LM accuracy {results['eval_mlm_accuracy']:.1%} (always "
          f"guessing {vocab.tokens[token]!r}: {count / sum(counts.values()):.1%}"
          f"), NSP accuracy {results['eval_nsp_accuracy']:.1%}")


def main(output_dir="demo_out"):
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    parameter_counts()
    pretrained, _ = minilm_parity(output_dir)
    sentence_similarity(pretrained)
    antiberty_parity(output_dir)
    pretraining(output_dir)
    _section("Done")
    print(f"{time.time() - start:.0f} s; converted checkpoints are in "
          f"{output_dir.resolve()}/{{minilm,antiberty}}, the pre-training "
          f"run in {output_dir.resolve()}/pretrain")
