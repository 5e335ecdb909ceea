"""Importers of other benchmark families into yanami datasets (docs/benchmarks.md).

``yanami import weave SRC --out DIR`` and ``yanami import imug SRC --out DIR`` read each
family's public layout and write an ordinary yanami dataset of that family: `validate`,
`stats`, `export` and `eval` take it as they take YANAMI's own. A bad record stops the
import with one line naming the file, the record and the field; nothing is written.
"""

from yanami.importers._imug import import_imug
from yanami.importers._weave import import_weave, weave_mode

__all__ = ["import_imug", "import_weave", "weave_mode"]
