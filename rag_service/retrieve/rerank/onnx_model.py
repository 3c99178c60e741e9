"""The ONNX backend: onnxruntime with the model's ``tokenizers`` tokenizer, and the int8 export of a cross-encoder."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_service.errors import ModelLoadError
from rag_service.forks import ChildLock
from rag_service.log import quiet_root_logger
from rag_service.onnx_runtime import cpu_session, files_key, load_onnxruntime
from rag_service.retrieve.rerank.base import FIX, RERANK_BATCH_SIZE, RERANK_MAX_LENGTH, check_labels, relevance
from rag_service.retrieve.rerank.hub import (
    load_errors,
    load_local_or_hub,
    local_snapshot,
    require_hub,
    resolve_source,
)


class OnnxReranker:
    """An ONNX cross-encoder run by onnxruntime, with its ``tokenizer.json`` (the ``tokenizers`` library).

    ``path`` is a directory holding ``model.onnx`` and the tokenizer files (as ``export_onnx`` writes
    them), or an ``.onnx`` file whose directory holds the tokenizer.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_length: int = RERANK_MAX_LENGTH,
        batch_size: int = RERANK_BATCH_SIZE,
        name: str | None = None,
        intra_op_threads: int = 0,
    ) -> None:
        model_file = Path(path).expanduser()
        if model_file.is_dir():
            model_file = model_file / "model.onnx"
        if not model_file.is_file():
            raise ModelLoadError(f"reranker ONNX model {model_file} does not exist; {FIX}")
        with load_errors(str(path)):
            self._tokenizer, self._max_length = _pair_tokenizer(model_file.parent, max_length)
            self._session = cpu_session(model_file, intra_op_threads or None)  # 0: the process-wide count
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._batch_size = batch_size
        self._lock = ChildLock()
        self.name = name or f"onnx:{path}"
        self.returns_logits = True

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Score all pairs in batches of ``batch_size``, padded to the longest pair of each batch."""
        import numpy as np

        out: list[float] = []
        with self._lock:  # one batch at a time: a tokenizer's padding state is shared
            for start in range(0, len(documents), self._batch_size):
                batch = list(documents[start : start + self._batch_size])
                encodings = self._tokenizer.encode_batch([(query, document) for document in batch])
                columns = {
                    "input_ids": [e.ids for e in encodings],
                    "attention_mask": [e.attention_mask for e in encodings],
                    "token_type_ids": [e.type_ids for e in encodings],
                }
                feed = {key: np.asarray(columns[key], dtype=np.int64) for key in self._inputs}
                out.extend(relevance(self._session.run(None, feed)[0]))
        return out


def _pair_tokenizer(folder: Path, max_length: int) -> tuple[Any, int]:
    """The ``tokenizers`` tokenizer of ``folder/tokenizer.json``, truncating pairs longest-first at
    ``max_length`` (at most the model's) and padding to each batch's longest; and that length.

    The ``tokenizers`` library, not transformers' ``AutoTokenizer``: importing transformers imports
    torch (6 s here), which the ONNX path otherwise never needs.
    """
    from tokenizers import Tokenizer

    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    length = min(max_length, int(config.get("model_max_length", max_length)))
    pad = config.get("pad_token") or "[PAD]"
    pad = pad["content"] if isinstance(pad, dict) else str(pad)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(length, strategy="longest_first")
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad) or 0, pad_token=pad)
    return tokenizer, length


def load_onnx(name_or_path: str, *, cache_dir: Path, max_length: int) -> OnnxReranker:
    """An ``.onnx`` model as it is, or a cross-encoder exported once to int8 ONNX under ``cache_dir``."""
    local = Path(name_or_path).expanduser()
    if local.suffix == ".onnx" or (local / "model.onnx").is_file():
        return OnnxReranker(local, max_length=max_length, name=f"onnx:{name_or_path}")
    source = resolve_source(name_or_path)
    slug = re.sub(r"[^\w.-]+", "_", name_or_path.strip("/\\~.")).strip("_")[-80:] or "model"
    snapshot = local_snapshot(source)
    files = files_key(snapshot, _SOURCE_FILES) if snapshot is not None else None
    if files is not None and (found := _export_of(cache_dir, slug, files)) is not None:
        return OnnxReranker(found, max_length=max_length, name=f"onnx-int8:{name_or_path}")  # no torch to start
    if snapshot is None:
        require_hub(name_or_path, source)  # fail before importing torch when it cannot be downloaded
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    def load(local_files_only: bool) -> tuple[Any, Any]:
        kwargs: dict[str, Any] = {"local_files_only": local_files_only}
        model = AutoModelForSequenceClassification.from_pretrained(source, attn_implementation="eager", **kwargs)
        return model, AutoTokenizer.from_pretrained(source, **kwargs)

    with load_errors(name_or_path):
        model, tokenizer = load_local_or_hub(name_or_path, source, load)
        check_labels(name_or_path, int(model.config.num_labels))
        target = cache_dir / f"{slug}-int8-{_fingerprint(model)[:16]}"
        if not (target / "model.onnx").is_file():
            export_onnx(model, tokenizer, target, quantize=True)
        snapshot = local_snapshot(source)  # downloaded now, if it was not before
        if snapshot is not None:  # the next start finds this export by the files, without torch
            (target / "rag_files_key").write_text(files_key(snapshot, _SOURCE_FILES) + "\n")
        del model
    return OnnxReranker(target, max_length=max_length, name=f"onnx-int8:{name_or_path}")


#: the files whose sizes (and small files' bytes) key a cross-encoder's export
_SOURCE_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json", "vocab.txt")


def _export_of(cache_dir: Path, slug: str, files: str) -> Path | None:
    """An earlier export of the same files, found by the key written beside it (``rag_files_key``)."""
    for key_file in sorted(cache_dir.glob(f"{slug}-int8-*/rag_files_key")):
        if key_file.read_text().strip() == files and (key_file.parent / "model.onnx").is_file():
            return key_file.parent
    return None


def export_onnx(model: Any, tokenizer: Any, target: Path, *, quantize: bool = True) -> Path:
    """Export a transformers sequence-classification model to ``target/model.onnx`` with its tokenizer.

    ``quantize`` applies onnxruntime's dynamic int8 quantisation to the weights. The directory is
    written beside ``target`` and renamed into place, so readers never see half an export. Needs
    the ``onnx`` package. Returns ``target``.
    """
    import torch

    try:
        import onnx  # noqa: F401  (torch's exporter and onnxruntime's quantiser both need it)
    except ImportError as err:
        raise ModelLoadError(
            f"exporting a reranker to ONNX needs the 'onnx' package: pip install onnx ({err})"
        ) from err
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        if getattr(model.config, "_attn_implementation", "eager") != "eager":
            model.set_attn_implementation("eager")
        model.eval()
        # a padded two-pair batch, so the traced graph keeps the general attention-mask path
        sample = tokenizer(
            ["a short query", "a somewhat longer query text"],
            ["a document", "a longer document with a few more words in it"],
            padding=True,
            return_tensors="pt",
        )
        names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
        fp32 = tmp / ("model_fp32.onnx" if quantize else "model.onnx")
        axes = {k: {0: "batch", 1: "sequence"} for k in names} | {"logits": {0: "batch"}}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # legacy-exporter deprecation and tracer notes, export only
            torch.onnx.export(
                model,
                (),
                str(fp32),
                kwargs={k: sample[k] for k in names},
                input_names=names,
                output_names=["logits"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        if quantize:
            load_onnxruntime()
            from onnxruntime.quantization import QuantType, quantize_dynamic

            with quiet_root_logger():
                quantize_dynamic(str(fp32), str(tmp / "model.onnx"), weight_type=QuantType.QInt8)
            fp32.unlink()
        tokenizer.save_pretrained(str(tmp))
        model.config.save_pretrained(str(tmp))
        info = {"source": str(getattr(model, "name_or_path", "")), "quantize": "int8" if quantize else None}
        (tmp / "rag_export.json").write_text(json.dumps(info, indent=2) + "\n")
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "model.onnx").is_file():  # not merely another process that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _fingerprint(model: Any) -> str:
    """sha256 of the model's weights and label count: an export is reused only for identical weights."""
    import torch

    digest = hashlib.sha256(f"{model.config.model_type}:{model.config.num_labels}".encode())
    with torch.no_grad():
        for key, tensor in sorted(model.state_dict().items()):
            digest.update(key.encode())
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
