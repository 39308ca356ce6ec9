"""`bert-tf pretrain`: assembles strategy, precision, model, data and trainer
from a `PretrainConfig` and runs it."""

import dataclasses

from bert_tf import checkpoints, config as config_lib, formats, sources
from bert_tf.data import service
from bert_tf.data.pretraining import pretraining_dataset
from bert_tf.models.encoder import BertEncoder
from bert_tf.models.pretrainer import BertPretrainer
from bert_tf.text.vocab import read_vocab
from bert_tf.training import distribute, run_setup
from bert_tf.training.optimization import create_optimizer, split_clipping
from bert_tf.training.trainer import Trainer


def load(path, overrides=()):
    """A validated `PretrainConfig` from YAML plus `key=value` overrides."""
    return config_lib.load_config(path, config_lib.PretrainConfig, overrides)


def named_init(cfg, log=print):
    """(cfg, canonical weights or None): an `init_checkpoint` that names a
    checkpoint (`bert_base_uncased`, `hf://ORG/NAME`, `hf:PATH`, ...) is
    read through `bert_tf.formats`, and its config becomes the encoder's;
    a bert_tf checkpoint path is left to the trainer."""
    spec = str(cfg.init_checkpoint)
    if not spec or not (sources.is_name(spec) or spec.partition(":")[0] in
                        formats.NAMED_READERS):
        return cfg, None
    encoder, weights, _ = formats.read_named(spec, log)
    return dataclasses.replace(cfg, encoder=encoder), weights


def _assign_named(weights, model, log):
    heads = {"masked_lm": ("cls/predictions/output_bias", model.masked_lm),
             "next_sentence": ("cls/seq_relationship/output_bias",
                               model.next_sentence)}
    present = {name: head for name, (key, head) in heads.items()
               if head is not None and key in weights}
    checkpoints.assign_weights(weights, model.encoder, **present)
    fresh = [name for name, (_, head) in heads.items()
             if head is not None and name not in present]
    if fresh:
        log(f"the checkpoint has no {' or '.join(fresh)} head: "
            "initialized randomly")


def build_trainer(cfg, log=print, weights=None):
    """The `Trainer` for a `PretrainConfig` (policy and seed set up);
    `weights` (from `named_init`) start the model."""
    cfg = run_setup.enter_policy(cfg, cfg.encoder.hidden_size, log)
    strategy = distribute.create_strategy(cfg.strategy, tpu=cfg.tpu)
    vocab = run_setup.checked_vocab(cfg.data.vocab, cfg.encoder)
    data = cfg.data

    def model_fn():
        model = BertPretrainer(BertEncoder.from_config_object(cfg.encoder),
                               nsp=cfg.nsp)
        if weights is not None:
            _assign_named(weights, model, log)
            log(f"initialized from {cfg.init_checkpoint}")
        elif cfg.init_checkpoint:
            prefix = checkpoints.restore_model(
                cfg.init_checkpoint, model.encoder, model.masked_lm,
                model.next_sentence)
            log(f"initialized from {prefix}")
        return model

    def dataset_fn(files, seed):
        return lambda context, skip_batches=0: pretraining_dataset(
            files, vocab, data.global_batch_size, data.seq_length,
            data.max_predictions_per_seq, data.masking_rate,
            data.whole_word_masking, seed=seed, input_context=context,
            shuffle_buffer=data.shuffle_buffer, skip_batches=skip_batches)

    def service_dataset_fn(context):
        # Every trainer input pipeline joins one job: the service's
        # workers read all shards, and each batch goes to one pipeline.
        batch_size = context.get_per_replica_batch_size(
            data.global_batch_size)
        local = pretraining_dataset(
            data.train_files.split(","), vocab, batch_size, data.seq_length,
            data.max_predictions_per_seq, data.masking_rate,
            data.whole_word_masking, seed=None,
            shuffle_buffer=data.shuffle_buffer)
        return service.distribute(
            local, data.service,
            job_name=f"bert_tf_pretrain:{cfg.trainer.model_dir}")

    train_fn = dataset_fn(data.train_files.split(","), data.seed)
    if data.service:
        service.check_dispatcher(data.service)
        log(f"training batches from the tf.data service at {data.service} "
            "(fresh order and masks per worker: data.seed applies to "
            "evaluation only)")
        train_fn = service_dataset_fn

    optimizer_config, clipnorm = split_clipping(cfg.optimizer,
                                                cfg.mixed_precision)
    return Trainer(
        strategy, model_fn, lambda: create_optimizer(optimizer_config),
        train_fn, cfg.trainer,
        eval_dataset_fn=(dataset_fn(data.eval_files, data.seed + 1)
                         if data.eval_files else None),
        global_batch_size=data.global_batch_size,
        clipnorm=clipnorm, log=log, checkpoint_input=not data.service)


def run(cfg, dry_run=False, log=print):
    """Pre-trains as `cfg` says (or, with `dry_run`, only shows the plan)."""
    if dry_run:
        run_setup.show_dry_run(cfg, log)
        log(f"encoder parameters: {cfg.encoder.num_parameters():,}")
        return None
    cfg, weights = named_init(cfg, log)
    with run_setup.run_policy(cfg, cfg.encoder.hidden_size, log) as cfg:
        trainer = build_trainer(cfg, log, weights)
        # The run directory is usable as a fine-tuning `init`.
        run_setup.write_run_files(trainer, {
            trainer.model_dir / checkpoints.CONFIG_FILE:
                lambda path: config_lib.save_config(
                    {"encoder": config_lib.to_dict(cfg.encoder)}, path),
            trainer.model_dir / checkpoints.VOCAB_FILE:
                read_vocab(cfg.data.vocab).save})
        run_setup.log_start(trainer, cfg, log)
        results = trainer.train()
    log("final: " + ", ".join(f"{k} {v:.4g}" for k, v in results.items()))
    log(f"checkpoints in {trainer.model_dir / 'checkpoints'}, TensorBoard "
        f"logs in {trainer.model_dir / 'tensorboard'}")
    return results
