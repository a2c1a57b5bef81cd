"""The files an export may write into its folder, and those an earlier export left there that this one does not
write: taken away, so that the folder holds one model. An earlier --int8 export's *.int8.onnx (sherpa-onnx's usual
names for what is deployed) stayed beside a new float export, the old model under the names people ship."""

from __future__ import annotations

import os

from rnnt.export.hotwords import BPE_MODEL, BPE_VOCAB
from rnnt.export.runtime import DECODING_JSON

GRAPHS = ("encoder", "decoder", "joiner")
EXPORT_FILES = ({f"{graph}{kind}.onnx" for graph in GRAPHS for kind in ("", ".int8")}
                | {"tokens.txt", "sherpa-onnx.json", DECODING_JSON, BPE_MODEL, BPE_VOCAB})


def remove_earlier_files(out_dir: str, written: set[str]) -> list[str]:
    """Removes each file an export may write that this one did not (written: their names); returns their names."""
    removed = sorted(name for name in EXPORT_FILES - written if os.path.isfile(os.path.join(out_dir, name)))
    for name in removed:
        os.remove(os.path.join(out_dir, name))
    return removed
