"""Small models whose programs leave dims open, for the NNAdapter shape-stream tests (tests/nnadapter/
test_shape_streams.py): each is saved with paddle.jit.save (PIR JSON) into tests/fixtures/dynamic/<name>/ with a
case.npz per listed shape (Paddle Inference references, IR optimisation off, 1 thread).

- ernie_like: an ERNIE-style sequence classifier: word + position (paddle.arange over the run-time length) +
  token-type embeddings, LayerNorm, 2 post-norm encoder layers (4 heads, gelu FFN), tanh pooler over token 0,
  2-class head; inputs input_ids / token_type_ids int64 [-1, -1] (batch and sequence length both open).

Run: python tools/make_dynamic_fixtures.py (needs paddlepaddle; the oracle, never imported by pdlite).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "dynamic"
sys.path.insert(0, str(Path(__file__).resolve().parent))
SEED = 3701
VOCAB, HIDDEN, HEADS, LAYERS, FFN, MAX_POS = 400, 64, 4, 2, 128, 128
CASES = {"case.npz": (1, 7), "case_b2_l19.npz": (2, 19), "case_b3_l40.npz": (3, 40)}


def _model():
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    class ErnieLike(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.word = nn.Embedding(VOCAB, HIDDEN)
            self.pos = nn.Embedding(MAX_POS, HIDDEN)
            self.token_type = nn.Embedding(2, HIDDEN)
            self.norm = nn.LayerNorm(HIDDEN)
            layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, FFN, dropout=0.0, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, LAYERS)
            self.pool = nn.Linear(HIDDEN, HIDDEN)
            self.head = nn.Linear(HIDDEN, 2)

        def forward(self, input_ids, token_type_ids):
            pos = paddle.arange(paddle.shape(input_ids)[1], dtype="int64").unsqueeze(0)
            x = self.word(input_ids) + self.pos(pos) + self.token_type(token_type_ids)
            x = self.encoder(self.norm(x))
            pooled = paddle.tanh(self.pool(x[:, 0]))
            return F.softmax(self.head(pooled), axis=-1), x

    return ErnieLike()


def main() -> int:
    import paddle
    from make_pir_fixtures import jit_save_to
    from paddle_reference import paddle_reference

    paddle.seed(SEED)
    rng = np.random.default_rng(SEED)
    layer = _model()
    for p in layer.parameters():  # O(1) activations: scaled normal weights
        p.set_value((rng.standard_normal(p.shape) * (0.3 if len(p.shape) > 1 else 0.1)).astype(np.float32))
    layer.eval()
    spec = [paddle.static.InputSpec([-1, -1], "int64", "input_ids"),
            paddle.static.InputSpec([-1, -1], "int64", "token_type_ids")]
    out = OUT / "ernie_like"
    jit_save_to(layer, spec, out, "pir", "ernie_like")
    for case, (b, n) in CASES.items():
        feeds = {"input_ids": rng.integers(0, VOCAB, (b, n)).astype(np.int64),
                 "token_type_ids": (np.arange(n)[None, :].repeat(b, 0) >= n // 2).astype(np.int64)}
        outs = paddle_reference(out / "inference.json", out / "inference.pdiparams", feeds)
        eager = layer(*[paddle.to_tensor(feeds[k]) for k in ("input_ids", "token_type_ids")])
        for i, e in enumerate(eager):
            ref = outs[f"fetch_name_{i}"]
            assert np.max(np.abs(e.numpy() - ref)) <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))), case
        np.savez_compressed(out / case, **{f"in:{k}": v for k, v in feeds.items()},
                            **{f"out:{k}": v for k, v in outs.items()})
    (out / "README.txt").write_text(
        "ernie_like: ERNIE-style sequence classifier (word + arange position + token-type embeddings, LayerNorm,\n"
        f"{LAYERS} post-norm encoder layers, {HEADS} heads, hidden {HIDDEN}, gelu FFN {FFN}, tanh pooler, 2-class softmax);\n"
        f"outputs: class probabilities [-1, 2] and the sequence output [-1, -1, {HIDDEN}].\n"
        f"made by tools/make_dynamic_fixtures.py with paddle {paddle.__version__} (jit.save, PIR JSON), seed {SEED}\n"
        "inputs: input_ids int64 [-1, -1], token_type_ids int64 [-1, -1] (batch and length open)\n"
        "references: Paddle Inference, switch_ir_optim(False), mkldnn off, 1 thread; "
        + ", ".join(f"{c} batch {b} length {n}" for c, (b, n) in CASES.items()) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
