"""The trainers' own reading code on yanami's exports: every record of each export read as the
trainer reads it, with that trainer's source at a commit you fetched (none of it is copied here)
and no weights.

    # checkouts of haotian-liu/LLaVA (c121f04 checked), LLaVA-VL/LLaVA-NeXT (df17966) and
    # ByteDance-Seed/Bagel (056b5fd), in /tmp/LLaVA, /tmp/LLaVA-NeXT and /tmp/Bagel; then, in a
    # virtual environment of their own (the trainers' transformers pins clash with the test extra's
    # datasets; transformers 5 has dropped the tokenizer attribute LLaVA-NeXT reads):
    pip install -e . torch==2.13.0 transformers==4.40.2 tokenizers==0.19.1 pandas pyarrow
    python benchmarks/bench_loaders.py --llava /tmp/LLaVA --llava-next /tmp/LLaVA-NeXT --bagel /tmp/Bagel

Any of the three may be left out (its rows are then not printed). The dataset is a world bench
built here (`--per-scenario`, default 5) unless `--bench DIR` names one; WEAVE's sample records
are added for BAGEL's edit layout, since a world dialogue's every edit step needs its dialogue.

What runs, per loader (the trainers' modules that hold models, optimisers or DeepSpeed are stood
in by empty modules: the reading code does not use them):

  LLaVA-1.5   `llava/train/train.py`, `LazySupervisedDataset.__getitem__` with the `vicuna_v1`
              conversation, CLIP's 336-px image processor and `image_aspect_ratio pad`, as its
              fine-tuning script sets them
  LLaVA-NeXT  `llava/train/train.py`, `LazySupervisedDataset._get_item` with `qwen_1_5`, SigLIP's
              384-px processor, `anyres_max_9` over its OneVision recipe's 6 x 6 grid
  BAGEL       `UnifiedEditIterableDataset` (`data/interleave_datasets/edit_dataset.py`: its Parquet
              reading by the `parquet_info` and `parse_row`, every row once) and
              `SftJSONLIterableDataset` (`data/vlm_dataset.py`: every line once), each made from
              the export's `dataset_info.py` entries, iterated through one pass; its `ImageTransform`
              is stood in by the picture as a tensor (torchvision's PyPI build does not load beside
              PyTorch's CPU build)

The tokenizer is byte-level (`tokenizers`, each byte one token; `<s>`, `</s>` and Qwen's
`<|im_start|>` / `<|im_end|>` single tokens), so a record's token count is its bytes'. A record
passes when the loader reads it, the image placeholders in its token ids number its pictures,
and some of its tokens are trained on (LLaVA's `preprocess` masks a record whose rounds do not
line up, with only a printed warning). Prints, per loader and export: records read, records
that pass, and the first failure of each kind; a loader whose code fails before its first record
(a checkout at another commit, a missing package) gets one line, and the exit status is then 1.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import types
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from yanami.contract import UserError
from yanami.store import Dataset, export_bagel, export_llava, export_llava_next
from yanami.world import build_world

# LLaVA-NeXT's conversation module asks the hub for a tokenizer, of no use here: offline, it fails at once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@contextlib.contextmanager
def _source(root: Path, stubs: dict[str, dict[str, Any]]) -> Iterator[None]:
    """``root`` first on the import path, ``stubs`` (module name: its attributes) standing in for
    the modules the reading code never calls; the modules of ``root`` and the stubs forgotten after
    (LLaVA and LLaVA-NeXT are both the package ``llava``)."""
    sys.path.insert(0, str(root))
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        module.__all__ = list(attrs)  # type: ignore[attr-defined]
        sys.modules[name] = module
    try:
        yield
    finally:
        sys.path.remove(str(root))
        packages = {entry.name for entry in root.iterdir() if entry.is_dir()}
        for name in list(sys.modules):
            if name in stubs or name.split(".")[0] in packages:
                del sys.modules[name]


def byte_tokenizer(qwen: bool = False, max_length: int = 1_000_000) -> Any:
    """A Hugging Face fast tokenizer with one token per byte and the trainers' special tokens whole:
    llama's (``<s>`` before every encoding, ``</s>``) or, with ``qwen``, Qwen's (no ``<s>``;
    ``<|im_start|>`` and ``<|im_end|>`` its only additional special tokens, a newline id 198 as in Qwen's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = [*specials, *sorted(pre_tokenizers.ByteLevel.alphabet())]
    newline = tokens.index("\u010a")  # byte-level's newline
    tokens[198], tokens[newline] = tokens[newline], tokens[198]
    tok = Tokenizer(models.BPE(vocab={t: k for k, t in enumerate(tokens)}, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    if qwen:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                       additional_special_tokens=specials[4:], model_max_length=max_length)  # fmt: skip
    else:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                       pad_token="<unk>", model_max_length=max_length)  # fmt: skip
        fast.legacy = True  # LLaVA-1.5's v1 preprocess: no offset per round (a llama tokenizer's legacy mode)
    return fast


class _Result:
    """What one loader made of one export's records."""

    def __init__(self, total: int = 0) -> None:
        self.total = total
        """The records the export holds."""
        self.read = 0
        self.passed = 0
        self.failures: Counter[str] = Counter()
        self.first: dict[str, str] = {}

    def fail(self, kind: str, record: str) -> None:
        self.failures[kind] += 1
        self.first.setdefault(kind, record)

    def line(self, loader: str, export: str) -> str:
        out = f"  {loader:<11} {export:<32} {self.read:5d} of {self.total:5d} read, {self.passed:5d} pass"
        for kind, n in self.failures.most_common():
            out += f"\n      {n:5d} x {kind} (first: {self.first[kind]})"
        return out


def _each(records: list[dict[str, Any]], read: Callable[[int], tuple[int, int, int]]) -> _Result:
    """``read(i)`` -> (pictures, image placeholders in the ids, tokens trained on) for record ``i``."""
    result = _Result(len(records))
    for i, rec in enumerate(records):
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                pictures, placeholders, trained = read(i)
        except Exception as exc:  # the loader's own error is the finding
            result.fail(f"{type(exc).__name__}: {str(exc)[:90]}", rec.get("id", str(i)))
            continue
        result.read += 1
        if placeholders != pictures:
            result.fail(f"{placeholders} image tokens for {pictures} pictures", rec.get("id", str(i)))
        elif trained == 0:
            said = printed.getvalue().strip().splitlines()
            result.fail(f"nothing trained on ({said[0][:60] if said else 'all masked'})", rec.get("id", str(i)))
        else:
            result.passed += 1
    return result


def _pictures(rec: dict[str, Any]) -> int:
    image = rec.get("image")
    return 0 if image is None else 1 if isinstance(image, str) else len(image)


# LLaVA-1.5 --------------------------------------------------------------------------------------


def llava15(src: Path, export: Path, data: str) -> _Result:
    """LLaVA-1.5's `LazySupervisedDataset` over ``export/data`` (its images under ``export/images``)."""
    from transformers import CLIPImageProcessor

    stubs = {"llava.model": {"LlavaLlamaForCausalLM": object}, "llava.train.llava_trainer": {"LLaVATrainer": object}}
    with _source(src, stubs):
        from llava import conversation as conversation_lib
        from llava.constants import IGNORE_INDEX, IMAGE_TOKEN_INDEX
        from llava.train import train

        conversation_lib.default_conversation = conversation_lib.conv_templates["vicuna_v1"]
        processor = CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
        data_args = train.DataArguments(data_path=str(export / data), lazy_preprocess=True, is_multimodal=True,
                                        image_folder=str(export / "images"), image_aspect_ratio="pad")  # fmt: skip
        data_args.image_processor = processor
        data_args.mm_use_im_start_end = False
        with contextlib.redirect_stdout(io.StringIO()):
            dataset = train.LazySupervisedDataset(str(export / data), byte_tokenizer(), data_args)
        records = dataset.list_data_dict

        def read(i: int) -> tuple[int, int, int]:
            item = dataset[i]
            ids, labels = item["input_ids"], item["labels"]
            return (_pictures(records[i]), int((ids == IMAGE_TOKEN_INDEX).sum()),
                    int((labels != IGNORE_INDEX).sum()))  # fmt: skip

        return _each(records, read)


# LLaVA-NeXT -------------------------------------------------------------------------------------


def llava_next(src: Path, export: Path, data: str) -> _Result:
    """LLaVA-NeXT's `LazySupervisedDataset` over ``export/data``, as its OneVision recipe sets it."""
    import importlib.util

    stubs = {"llava.model": {"LlavaLlamaForCausalLM": object}, "llava.train.llava_trainer": {"LLaVATrainer": object},
             "deepspeed": {}}  # fmt: skip
    with _source(src, stubs), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its conversation module's call to the hub, offline here
        from llava import conversation as conversation_lib
        from llava.constants import IGNORE_INDEX, IMAGE_TOKEN_INDEX
        from llava.train import train

        # The SigLIP tower's own processor (its module also defines the tower, which is not built).
        path = src / "llava" / "model" / "multimodal_encoder" / "siglip_encoder.py"
        spec = importlib.util.spec_from_file_location("llava_next_siglip", path)
        assert spec is not None and spec.loader is not None
        siglip = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(siglip)
        conversation_lib.default_conversation = conversation_lib.conv_templates["qwen_1_5"]
        data_args = train.DataArguments(data_path=str(export / data), lazy_preprocess=True, is_multimodal=True,
                                        image_folder=str(export / "images"), image_aspect_ratio="anyres_max_9",
                                        image_grid_pinpoints="(1x1),...,(6x6)")  # fmt: skip
        data_args.image_processor = siglip.SigLipImageProcessor()
        data_args.mm_use_im_start_end = False
        with contextlib.redirect_stdout(io.StringIO()):
            dataset = train.LazySupervisedDataset(str(export / data), byte_tokenizer(qwen=True), data_args)
        records = dataset.list_data_dict

        def read(i: int) -> tuple[int, int, int]:
            item = dataset._get_item(i)
            ids, labels = item["input_ids"], item["labels"]
            return (_pictures(records[i]), int((ids == IMAGE_TOKEN_INDEX).sum()),
                    int((labels != IGNORE_INDEX).sum()))  # fmt: skip

        return _each(records, read)


# BAGEL -----------------------------------------------------------------------------------------


class _Repeat(Exception):
    """A BAGEL dataset has gone through its data once and starts again."""


class _Pictures:
    """Stands in for BAGEL's `ImageTransform` (its module needs torchvision, whose PyPI build does not
    load beside PyTorch's CPU build): the picture as a C x H x W tensor, as the transform returns it."""

    stride = 14

    def __call__(self, image: Any, img_num: int = 1) -> Any:
        import numpy as np
        import torch

        return torch.from_numpy(np.asarray(image, dtype=np.float32)).permute(2, 0, 1)


def _once(dataset: Any, module: Any, errors: list[str]) -> list[dict[str, Any]]:
    """Everything ``dataset`` yields until it says it repeats (its ``print`` in ``module`` caught):
    BAGEL's datasets loop for ever, skipping a sample that fails with a printed error."""

    def said(*args: object, **kwargs: object) -> None:
        text = " ".join(str(a) for a in args)
        if " repeat in rank-" in text:
            raise _Repeat
        if text.startswith("Error") or "skipped" in text:
            errors.append(text)

    module.print = said
    out: list[dict[str, Any]] = []
    with contextlib.suppress(_Repeat), contextlib.redirect_stderr(io.StringIO()) as traces:
        out.extend(iter(dataset))
    errors.extend(line for line in traces.getvalue().splitlines() if line and not line.startswith(" "))
    return out


def bagel(src: Path, export: Path) -> list[tuple[str, _Result]]:
    """BAGEL's `UnifiedEditIterableDataset` over the ``unified_edit`` Parquet and its
    `SftJSONLIterableDataset` over the ``vlm_sft`` JSONL, as the export's `dataset_info.py` names
    them: each layout's name and result."""
    import random
    import runpy

    import pyarrow.parquet as pq

    info = runpy.run_path(str(export / "dataset_info.py"))["YANAMI_DATASET_INFO"]
    with _source(src, {}):
        from data import vlm_dataset
        from data.interleave_datasets import edit_dataset, interleave_t2i_dataset

        edit = _Result()
        for name, entry in info.get("unified_edit", {}).items():
            parquet_info = json.loads(Path(entry["parquet_info_path"]).read_text(encoding="utf-8"))
            edit.total += sum(pq.ParquetFile(path).metadata.num_rows for path in parquet_info)
            dataset = edit_dataset.UnifiedEditIterableDataset(
                name, _Pictures(), byte_tokenizer(qwen=True), _Pictures(), [entry["data_dir"]],
                [entry["num_files"]], parquet_info, num_workers=1,
            )  # fmt: skip
            random.seed(0)  # parse_row draws which steps of a row it trains on
            errors: list[str] = []
            for sample in _once(dataset, interleave_t2i_dataset, errors):
                edit.read += 1
                plan = sample["sequence_plan"]
                target = [p for p in plan if p["type"] == "vae_image" and p["loss"]]
                said = [p for p in plan if p["type"] == "text"]
                key = f"{name} row {sample['data_indexes']['data_indexes'][1]}"
                if not target or not said or len(sample["text_ids_list"]) != len(said):
                    edit.fail("no picture to learn or no instruction", key)
                else:
                    edit.passed += 1
            for error in errors:
                edit.fail(error.split(" in rg#")[0][:90], name)
        sft = _Result()
        for name, entry in info.get("vlm_sft", {}).items():
            records = [json.loads(line) for line in Path(entry["jsonl_path"]).read_text(encoding="utf-8").splitlines()]
            sft.total += len(records)
            dataset = vlm_dataset.SftJSONLIterableDataset(
                name, _Pictures(), byte_tokenizer(qwen=True), None, [entry["jsonl_path"]], [entry["data_dir"]],
                [entry["num_total_samples"]], num_workers=1,
            )  # fmt: skip
            errors = []
            for sample in _once(dataset, vlm_dataset, errors):
                sft.read += 1
                k = sample["data_indexes"]["data_indexes"]
                plan = sample["sequence_plan"]
                shown = sum(p["type"] == "vit_image" for p in plan)
                if shown != len(sample["image_tensor_list"]):
                    sft.fail(f"{shown} image places for {len(sample['image_tensor_list'])} pictures", f"line {k}")
                elif not any(p["loss"] for p in plan):
                    sft.fail("nothing trained on", f"line {k}")
                else:
                    sft.passed += 1
            for error in errors:
                sft.fail(error[:90], name)
        return [("unified_edit", edit), ("vlm_sft", sft)]


# The run ----------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llava", type=Path, help="a checkout of haotian-liu/LLaVA (LLaVA-1.5)")
    ap.add_argument("--llava-next", type=Path, help="a checkout of LLaVA-VL/LLaVA-NeXT")
    ap.add_argument("--bagel", type=Path, help="a checkout of ByteDance-Seed/Bagel")
    ap.add_argument("--bench", type=Path, help="a dataset to export (default: a world bench built here)")
    ap.add_argument("--per-scenario", type=int, default=5)
    args = ap.parse_args()
    for name in ("llava", "llava_next", "bagel"):
        path = getattr(args, name)
        if path is not None and not (path / ("data" if name == "bagel" else "llava")).is_dir():
            ap.error(f"--{name.replace('_', '-')}: {path} is no checkout of that repository")
    if args.llava is None and args.llava_next is None and args.bagel is None:
        ap.error("name at least one checkout: --llava, --llava-next or --bagel")
    if args.bench is not None:
        try:
            Dataset(args.bench)
        except UserError as exc:
            ap.error(f"--bench: {exc}")
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        ap.error(f"{exc}: install the packages the docstring names, in a virtual environment of their own")
    transformers_logging.set_verbosity_error()
    broken = 0

    def show(loader: str, export: str, read: Callable[[], _Result | list[tuple[str, _Result]]]) -> None:
        """Print what ``read()`` made of an export (its result, or each layout's); a loader whose code
        fails before its first record (a checkout at another commit, a missing package) gets one line."""
        nonlocal broken
        try:
            made = read()
        except Exception as exc:  # the trainer's code, not ours: its failure is the finding
            broken += 1
            print(f"  {loader:<11} {export:<32} its code failed before any record: {type(exc).__name__}: {exc}")
            return
        rows = [(export, made)] if isinstance(made, _Result) else [(f"{name} {export}", r) for name, r in made]
        for label, result in rows:
            print(result.line(loader, label), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bench = args.bench
        if bench is None:
            bench = root / "bench"
            build_world(bench, per_scenario=args.per_scenario, seed=42)
        exports = {
            "llava": (export_llava(bench, root / "llava"), "llava.json"),
            "llava-next": (export_llava_next(bench, root / "llava-next"), "llava_next.json"),
        }
        print(f"loaders on the exports of {bench if args.bench else 'a world bench'}:")
        for name, (out, data) in exports.items():
            if args.llava is not None:
                show("LLaVA-1.5", f"--format {name}", partial(llava15, args.llava, out, data))
            if args.llava_next is not None:
                show("LLaVA-NeXT", f"--format {name}", partial(llava_next, args.llava_next, out, data))
        if args.bagel is not None:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: its tests' WEAVE samples
            from tests.families.samples import write_weave

            from yanami.families.weave.importer import import_weave

            import_weave(write_weave(root / "weave-src"), root / "weave")
            named = "the bench" if args.bench else "world"
            for k, (source, label) in enumerate(((bench, named), (root / "weave", "WEAVE's samples"))):
                show("BAGEL", f"({label})", partial(bagel, args.bagel, export_bagel(source, root / f"bagel-{k}")))
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
