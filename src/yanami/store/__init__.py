"""Dataset directories: content-addressed images, sharded JSONL dialogues, a manifest."""

from yanami.store._bench import bench_sha256, open_bench
from yanami.store._fast import json_object
from yanami.store._images import (
    DEFAULT_MAX_PIXELS,
    ImageFileError,
    ImageProblem,
    image_header,
    image_info,
    image_relpath,
    is_sha256,
    open_image_bytes,
    scan_image_files,
    sha256_file,
)
from yanami.store._leakage import DEFAULT_THRESHOLD, LeakageReport, NearDuplicate, find_leakage, phash
from yanami.store._manifest import FORMAT_NAME, FORMAT_VERSION, MANIFEST, Counts, Generator, Manifest, provenance
from yanami.store._parquet import HF_FEATURES, export_parquet, import_parquet
from yanami.store._reader import Dataset, Location, Scanned, open_dataset_dir
from yanami.store._select import Selection, select_dialogues
from yanami.store._sources import Imported, import_source
from yanami.store._stats import DatasetStats, ScenarioStats, dataset_stats, stats_tables
from yanami.store._trainers import (
    export_bagel,
    export_llava,
    export_llava_next,
    export_webdataset,
    read_webdataset,
)
from yanami.store._validate import Problem, validate_dataset
from yanami.store._walk import DialogueWalk, dialogue_problems
from yanami.store._writer import DatasetWriter, images_digest, place_file

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_THRESHOLD",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HF_FEATURES",
    "MANIFEST",
    "Counts",
    "Dataset",
    "DatasetStats",
    "DatasetWriter",
    "DialogueWalk",
    "Generator",
    "ImageFileError",
    "ImageProblem",
    "Imported",
    "LeakageReport",
    "Location",
    "Manifest",
    "NearDuplicate",
    "Problem",
    "Scanned",
    "ScenarioStats",
    "Selection",
    "bench_sha256",
    "dataset_stats",
    "dialogue_problems",
    "export_bagel",
    "export_llava",
    "export_llava_next",
    "export_parquet",
    "export_webdataset",
    "find_leakage",
    "image_header",
    "image_info",
    "image_relpath",
    "images_digest",
    "import_parquet",
    "import_source",
    "is_sha256",
    "json_object",
    "open_bench",
    "open_dataset_dir",
    "open_image_bytes",
    "phash",
    "place_file",
    "provenance",
    "read_webdataset",
    "scan_image_files",
    "select_dialogues",
    "sha256_file",
    "stats_tables",
    "validate_dataset",
]
