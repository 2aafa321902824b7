"""Module 11's Use section (training on real text), rotary positions, and `tinytorch demo`."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gradcheck import check_gradients
from tinytorch.core.char_model import char_groups, nearest_neighbours, structure_score, train_char_model, unigram_entropy
from tinytorch.core.embeddings import RotaryPositionalEmbedding
from tinytorch.core.tokenization import CharTokenizer

CORPUS = ("The cat sat on the mat. The dog sat on the log. 12 cats and 34 dogs met 56 birds. "
          "A BIG RED BOX held 7 8 9 small boxes; each box was red, blue or green! ") * 40
CLI = Path(sys.executable).parent / "tinytorch"


# ------------------------------------------------------------------ training

@pytest.fixture(scope="module")
def trained():
    return train_char_model(CORPUS, steps=150, seq_length=16, batch_size=16, embedding_dim=16, seed=0)


def test_training_reduces_loss_below_unigram_entropy(trained):
    losses = trained["losses"]
    assert losses[:5].mean() > trained["unigram_entropy"] > losses[-20:].mean() + 0.2, (
        losses[:5].mean(), trained["unigram_entropy"], losses[-20:].mean())
    assert abs(losses[0] - trained["uniform_loss"]) < 0.5


def test_training_is_deterministic_for_a_seed(trained):
    again = train_char_model(CORPUS, steps=150, seq_length=16, batch_size=16, embedding_dim=16, seed=0)
    np.testing.assert_array_equal(again["losses"], trained["losses"])
    other = train_char_model(CORPUS, steps=20, seq_length=16, batch_size=16, embedding_dim=16, seed=1)
    assert not np.array_equal(other["losses"], trained["losses"][:20])


def test_structure_score_rises_with_training(trained):
    groups = char_groups(trained["tokenizer"])
    before = structure_score(trained["initial_table"], groups)["score"]
    after = structure_score(trained["table"], groups)["score"]
    assert abs(before) < 0.15 and after > before + 0.1, (before, after)


def test_structure_score_and_neighbours_on_a_known_table():
    tok = CharTokenizer()
    table = np.random.default_rng(0).normal(size=(tok.vocab_size, 4)) * 0.01
    digits = [tok.char_to_idx[c] for c in "0123456789"]
    vowels = [tok.char_to_idx[c] for c in "aeiou"]
    table[digits] += [5, 0, 0, 0]                       # digits point one way, vowels another
    table[vowels] += [0, 5, 0, 0]
    s = structure_score(table, {"digits": digits, "vowels": vowels})
    assert s["within"] > 0.99 and abs(s["between"]) < 0.01 and s["score"] > 0.98, s
    assert set(nearest_neighbours(table, tok, "3", k=3)["3"]) <= set("0123456789")


def test_unigram_entropy_matches_hand_computation():
    assert unigram_entropy(np.array([0, 0, 1, 1]), 3) == pytest.approx(np.log(2))
    assert unigram_entropy(np.array([2, 2, 2]), 3) == 0


def test_training_rejects_bad_arguments():
    with pytest.raises(ValueError, match="steps"):
        train_char_model(CORPUS, steps=0)
    with pytest.raises(ValueError, match="characters"):
        train_char_model("short", steps=5, seq_length=16)


# ------------------------------------------------------------------ rotary positions

def _rotate_closed_form(x, position, base=10000.0):
    dim = x.shape[-1]
    out = np.empty_like(x, dtype=np.float64)
    for i in range(dim // 2):
        angle = position * base ** (-2 * i / dim)
        c, s = np.cos(angle), np.sin(angle)
        out[2 * i] = c * x[2 * i] - s * x[2 * i + 1]
        out[2 * i + 1] = s * x[2 * i] + c * x[2 * i + 1]
    return out


def test_rope_matches_closed_form_rotation():
    rope = RotaryPositionalEmbedding(6, max_seq_length=20)
    x = np.random.default_rng(0).normal(size=(5, 6))
    got = rope(x.astype(np.float32), start_pos=7).data
    expected = np.stack([_rotate_closed_form(x[p], 7 + p) for p in range(5)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 8).map(lambda h: 2 * h), st.integers(0, 60), st.integers(0, 60), st.integers(0, 200),
       st.integers(0, 2**31 - 1))
def test_rope_scores_depend_only_on_relative_position(dim, m, n, shift, seed):
    rope = RotaryPositionalEmbedding(dim, max_seq_length=300)
    q, k = np.random.default_rng(seed).normal(size=(2, 1, dim))

    def score(a, b):
        return float(rope(q, start_pos=a).data[0] @ rope(k, start_pos=b).data[0])
    assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-4)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(0, 100))
def test_rope_preserves_norms(seed, start_pos):
    rope = RotaryPositionalEmbedding(8, max_seq_length=200)
    x = np.random.default_rng(seed).normal(size=(3, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(np.linalg.norm(rope(x, start_pos).data, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


def test_rope_gradient_matches_finite_differences():
    rope = RotaryPositionalEmbedding(4, max_seq_length=16)
    check_gradients(lambda x: rope(x, start_pos=3), np.random.default_rng(1).normal(size=(2, 5, 4)))


def test_rope_old_offset_name_still_works_with_a_warning():
    rope = RotaryPositionalEmbedding(4, 16)
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    with pytest.warns(DeprecationWarning, match="start_pos") as caught:
        old = rope(x, offset=5).data
    np.testing.assert_array_equal(old, rope(x, start_pos=5).data)
    # Python shows a DeprecationWarning by default only when it points at the caller's own code (__main__, a cell)
    assert [w.filename for w in caught] == [__file__], f"the warning points at {[w.filename for w in caught]}, not the call"


@pytest.mark.parametrize("make, call, err, pattern", [
    (lambda: RotaryPositionalEmbedding(5), None, ValueError, "even, got 5"),
    (lambda: RotaryPositionalEmbedding(4, max_seq_length=0), None, ValueError, "max_seq_length"),
    (lambda: RotaryPositionalEmbedding(4, base=1), None, ValueError, "base"),
    (lambda: RotaryPositionalEmbedding(4, 8), lambda r: r(np.zeros((9, 4))), ValueError, "9 from start_pos 0 .* past max_seq_length 8"),
    (lambda: RotaryPositionalEmbedding(4, 8), lambda r: r(np.zeros((2, 4)), start_pos=7), ValueError, "up to 8, past max_seq_length 8"),
    (lambda: RotaryPositionalEmbedding(4, 8), lambda r: r(np.zeros((2, 6))), ValueError, r"\(2, 6\)"),
    (lambda: RotaryPositionalEmbedding(4, 8), lambda r: r(np.zeros((2, 4)), start_pos=-1), ValueError, "start_pos must be a non-negative integer, got -1"),
    (lambda: RotaryPositionalEmbedding(4, 8), lambda r: r(np.zeros((2, 4)), start_pos=1, offset=1), TypeError, "start_pos only"),
    (lambda: RotaryPositionalEmbedding(4, 8), lambda r: r(np.zeros((2, 4), np.int64)), TypeError, "int64"),
])
def test_rope_bad_input(make, call, err, pattern):
    with pytest.raises(err, match=pattern):
        layer = make()
        call(layer)


# ------------------------------------------------------------------ tinytorch demo

def _demo(tmp_path, *args):
    return subprocess.run([CLI, "demo", *map(str, args)], capture_output=True, text=True, cwd=tmp_path,
                          env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})


def test_demo_trains_and_writes_plots(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text(CORPUS)
    out = _demo(tmp_path, "--text", text, "--steps", 120, "--seed", 1, "--out", tmp_path / "plots")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "below the unigram entropy" in out.stdout and "NOT below" not in out.stdout, out.stdout
    assert "nearest neighbours" in out.stdout and "GB/s" in out.stdout
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == ["embedding_map.png", "lookup_roofline.png", "loss.png", "positional_encoding.png"], pngs


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), (b"", "empty"), (b"\x00\x01\x02binary", "binary"), ("café".encode("latin-1"), "not UTF-8"),
])
def test_demo_bad_text_is_one_clear_line_and_writes_nothing(tmp_path, content, message):
    path = tmp_path / "input.txt"
    if content is not None:
        path.write_bytes(content)
    out = _demo(tmp_path, "--text", path, "--out", tmp_path / "plots")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0], out.stderr
    assert not (tmp_path / "plots").exists() and out.stdout == ""


@pytest.mark.parametrize("steps", ["0", "-3", "many"])
def test_demo_bad_steps_is_a_usage_error(tmp_path, steps):
    out = _demo(tmp_path, "--steps", steps)
    assert out.returncode == 2 and "usage" in out.stderr and "positive integer" in out.stderr, out.stderr
