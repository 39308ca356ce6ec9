import pytest
import yaml

from bert_tf import config, presets
from bert_tf.config import EncoderConfig, ModelConfig


def test_paper_parameter_counts_from_presets():
    assert config.load_preset("bert_base").num_parameters() == 109_482_240
    assert config.load_preset("bert_large").num_parameters() == 335_141_888


def test_all_named_presets_exist_with_their_sizes():
    expected = {
        "bert_tiny": (2, 128, 2), "bert_mini": (4, 256, 4),
        "bert_small": (4, 512, 8), "bert_medium": (8, 512, 8),
        "bert_base": (12, 768, 12), "bert_large": (24, 1024, 16),
        # The paper's Table 6 sizes not covered by base/large.
        "bert_l3_h768_a12": (3, 768, 12), "bert_l6_h768_a3": (6, 768, 3),
        "bert_l6_h768_a12": (6, 768, 12), "bert_l12_h1024_a16": (12, 1024, 16),
    }
    assert set(expected) <= set(presets.available())
    for name, (layers, hidden, heads) in expected.items():
        cfg = config.load_preset(name)
        assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads) == (
            layers, hidden, heads)
        assert cfg.intermediate_size == 4 * hidden
        assert cfg.hidden_act == "gelu" and cfg.layer_norm_eps == 1e-12


def test_dotted_override():
    cfg = config.load_config(presets.preset_path("bert_tiny"),
                             overrides=["encoder.num_layers=4",
                                        "encoder.hidden_act=gelu_exact"])
    assert cfg.encoder.num_layers == 4
    assert cfg.encoder.hidden_act == "gelu_exact"


def test_unknown_key_lists_valid_keys(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"encoder": {"num_layer": 2}}))
    with pytest.raises(ValueError) as e:
        config.load_config(path)
    message = str(e.value)
    assert "encoder.num_layer" in message and "num_layers" in message
    assert str(path) in message


def test_unknown_override_key_is_an_error():
    with pytest.raises(ValueError, match="encoder.hidden"):
        config.load_config(presets.preset_path("bert_tiny"),
                           overrides=["encoder.hidden=3"])


def test_hidden_not_divisible_by_heads():
    with pytest.raises(ValueError) as e:
        config.load_config(presets.preset_path("bert_tiny"),
                           overrides=["encoder.num_heads=3"])
    assert "encoder.hidden_size = 128" in str(e.value)
    assert "not divisible" in str(e.value)


@pytest.mark.parametrize("key", ["vocab_size", "hidden_size", "num_layers",
                                 "num_heads", "intermediate_size",
                                 "max_position_embeddings"])
def test_non_positive_sizes(key):
    with pytest.raises(ValueError, match=f"encoder.{key} = 0: must be > 0"):
        config.load_config(presets.preset_path("bert_tiny"),
                           overrides=[f"encoder.{key}=0"])


def test_wrong_types_and_choices():
    with pytest.raises(ValueError, match="encoder.num_layers = 'two'"):
        config.from_dict(ModelConfig, {"encoder": {"num_layers": "two"}})
    with pytest.raises(ValueError, match="encoder.attention = 'sideways'"):
        config.from_dict(ModelConfig,
                         {"encoder": {"attention": "sideways"}}).validate()
    with pytest.raises(ValueError, match="hidden_act"):
        EncoderConfig(hidden_act="swish").validate()


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        config.load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("encoder: [unclosed")
    with pytest.raises(ValueError, match="not valid YAML"):
        config.load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping"):
        config.load_config(listy)
    with pytest.raises(ValueError, match="must look like key.path=value"):
        config.apply_overrides({}, ["encoder.num_layers"])


def test_encoder_preset_by_name_in_a_config():
    cfg = config.from_dict(ModelConfig, {"encoder": "bert_mini"})
    assert cfg.encoder.hidden_size == 256
    with pytest.raises(ValueError, match="available presets"):
        config.load_preset("bert_gigantic")


def test_save_and_load_round_trip(tmp_path):
    cfg = ModelConfig(EncoderConfig(num_layers=3, attention="causal"))
    path = config.save_config(cfg, tmp_path / "c.yaml")
    assert config.load_config(path) == cfg


def test_renamed_finetune_key_is_read_with_a_warning():
    with pytest.warns(FutureWarning, match="'dropout' is deprecated: it is "
                      "now 'head_dropout'"):
        cfg = config.from_dict(config.FinetuneConfig, {"dropout": 0.3})
    assert cfg.head_dropout == 0.3
    with pytest.raises(ValueError, match="both set"):
        config.from_dict(config.FinetuneConfig,
                         {"dropout": 0.3, "head_dropout": 0.2})
