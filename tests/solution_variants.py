"""Correct solutions of module 11 written in other ways than the instructor's (loops, vectorised,
another NumPy routine), for the class report's similarity tests: students who worked alone hand in
code that differs, and a copy with the names changed and statements moved still shares most of its
fingerprints with the original.

`VARIANTS[cell id]` holds three ways of writing that cell's solution regions (one body per region,
in order). `solved_as(release, source, way)` is the release with every solution written the `way`-th
way (0: the instructor's code in a student's words, as `course_scenarios.solve(...,
own_words=True)`; 1-3: the ways below)."""
import copy
import random
import re

from course_scenarios import MY_BEGIN, MY_END, cells_by_id, in_own_words, src

VARIANTS = {
    "lookup": [
        ["""n = table.shape[0]
for i in ids.ravel():
    if not 0 <= i < n:
        raise TokenIdError(f"token id {i} is out of range: ids must be in [0, {n})")
return table[ids].copy()"""],
        ["""flat = ids.reshape(-1)
bad = np.flatnonzero((flat < 0) | (flat >= len(table)))
if bad.size > 0:
    culprit = flat[bad[0]]
    raise TokenIdError("token id %d is out of range: ids must be in [0, %d)"
                       % (culprit, len(table)))
rows = table[flat]
return rows.reshape(*ids.shape, table.shape[1])"""],
        ["""size = len(table)
flat_ids = [int(t) for t in np.ravel(ids)]
wrong = [t for t in flat_ids if t < 0 or t >= size]
if wrong:
    raise TokenIdError(f"id {wrong[0]} is not a valid token: valid ids are [0, {size})")
picked = np.array([table[t] for t in flat_ids], dtype=table.dtype)
return picked.reshape(ids.shape + table.shape[1:])"""],
    ],
    "scatter": [
        ["""out = np.zeros((num_rows, rows.shape[-1]), dtype=rows.dtype)
for position, row_id in enumerate(np.reshape(ids, -1)):
    out[row_id] += rows[position]
return out""",
         """totals = {}
for i, row in zip(np.ravel(ids).tolist(), rows):
    totals[i] = totals[i] + row if i in totals else row.copy()
keys = sorted(totals)
unique = np.array(keys, dtype=np.asarray(ids).dtype)
summed = np.array([totals[k] for k in keys], dtype=rows.dtype).reshape(len(keys), rows.shape[1])
return unique, summed"""],
        ["""order = np.argsort(np.ravel(ids), kind='stable')
sorted_ids = np.ravel(ids)[order]
total = np.zeros((num_rows, rows.shape[1]), rows.dtype)
if sorted_ids.size:
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_ids)) + 1]
    total[sorted_ids[starts]] = np.add.reduceat(rows[order], starts, axis=0)
return total""",
         """flat = np.ravel(ids)
order = np.argsort(flat, kind='stable')
ordered = flat[order]
if ordered.size == 0:
    return ordered, np.zeros((0,) + rows.shape[1:], rows.dtype)
starts = np.concatenate(([0], np.nonzero(ordered[1:] != ordered[:-1])[0] + 1))
return ordered[starts], np.add.reduceat(rows[order], starts, axis=0)"""],
        ["""acc = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)
for u in np.unique(ids):
    acc[u] = rows[np.asarray(ids) == u].sum(axis=0)
return acc""",
         """distinct = np.unique(ids)
out = np.empty((len(distinct), rows.shape[1]), dtype=rows.dtype)
for j, value in enumerate(distinct):
    out[j] = rows[np.ravel(ids) == value].sum(axis=0)
return distinct, out"""],
    ],
    "embedding-grad": [
        ["""ids_1d = ids.reshape(-1)
grads_2d = d_out.reshape(ids_1d.size, d_out.shape[-1])
if padding_idx is not None:
    mask = ids_1d != padding_idx
    return scatter_add_rows(ids_1d[mask], grads_2d[mask], num_rows)
return scatter_add_rows(ids_1d, grads_2d, num_rows)"""],
        ["""pairs = [(i, g) for i, g in zip(np.ravel(ids), d_out.reshape(-1, d_out.shape[-1]))
         if padding_idx is None or i != padding_idx]
if not pairs:
    return np.zeros((num_rows, d_out.shape[-1]), dtype=d_out.dtype)
kept_ids = np.array([i for i, _ in pairs])
kept_rows = np.stack([g for _, g in pairs])
return scatter_add_rows(kept_ids, kept_rows, num_rows)"""],
        ["""width = d_out.shape[-1]
if padding_idx is None:
    weights = np.ones(np.size(ids), dtype=bool)
else:
    weights = np.ravel(ids) != padding_idx
chosen = np.compress(weights, np.ravel(ids))
chosen_rows = np.compress(weights, d_out.reshape(-1, width), axis=0)
return scatter_add_rows(chosen, chosen_rows, num_rows)"""],
    ],
    "init": [
        ["""if init_type not in INIT_TYPES:
    raise ValueError(f"unknown init_type {init_type!r}: expected one of {INIT_TYPES}")
if init_type == 'normal':
    scale = np.float32(embedding_dim ** -0.5)
    return rng.standard_normal((vocab_size, embedding_dim), dtype=np.float32) * scale
if init_type == 'uniform':
    limit = embedding_dim ** -0.5
else:
    limit = (6 / (vocab_size + embedding_dim)) ** 0.5
u = rng.random((vocab_size, embedding_dim), dtype=np.float32)
return u * np.float32(2 * limit) - np.float32(limit)"""],
        ["""shape = (vocab_size, embedding_dim)
if init_type == 'uniform':
    a = 1.0 / math.sqrt(embedding_dim)
    return (rng.random(shape, dtype=np.float32) - np.float32(0.5)) * np.float32(2 * a)
elif init_type == 'xavier':
    a = math.sqrt(6.0 / (vocab_size + embedding_dim))
    return (rng.random(shape, dtype=np.float32) - np.float32(0.5)) * np.float32(2 * a)
elif init_type == 'normal':
    return rng.standard_normal(shape, dtype=np.float32) / np.float32(math.sqrt(embedding_dim))
raise ValueError("init_type must be one of %r, not %r" % (INIT_TYPES, init_type))"""],
        ["""spreads = {'uniform': 1 / math.sqrt(embedding_dim),
           'normal': 1 / math.sqrt(embedding_dim),
           'xavier': math.sqrt(6 / (vocab_size + embedding_dim))}
if init_type not in spreads:
    raise ValueError(f"{init_type!r} is not an init_type; choose from {', '.join(INIT_TYPES)}")
spread = np.float32(spreads[init_type])
if init_type == 'normal':
    values = rng.standard_normal(size=(vocab_size, embedding_dim), dtype=np.float32)
    values *= spread
else:
    values = rng.random(size=(vocab_size, embedding_dim), dtype=np.float32)
    values = spread * (2 * values - 1)
return values"""],
    ],
    "as-ids": [
        ["""if isinstance(ids, Tensor):
    ids = ids.data
if isinstance(ids, str) or isinstance(ids, bytes):
    raise TypeError(f"expected integer token ids, got text {ids!r:.30}")
if isinstance(ids, (list, tuple)) and len(ids) == 0:
    arr = np.array(ids, dtype=np.int64)
else:
    arr = np.asarray(ids)
if not np.issubdtype(arr.dtype, np.integer):
    raise TypeError(f"expected integer token ids, got dtype {arr.dtype}")
if vocab_size is not None and arr.size:
    outside = (arr < 0) | (arr >= vocab_size)
    if outside.any():
        raise TokenIdError(f"token id {arr[outside].flat[0]} is out of range: "
                           f"ids must be in [0, {vocab_size})")
return arr"""],
        ["""data = ids.data if isinstance(ids, Tensor) else ids
if type(data) in (str, bytes):
    raise TypeError("token ids must be integers, not text: tokenize %r first" % (data[:40],))
empty_sequence = isinstance(data, (list, tuple)) and not data
out = np.zeros(0, dtype=np.int64) if empty_sequence else np.asarray(data)
if out.dtype.kind != 'i' and out.dtype.kind != 'u':
    raise TypeError("token ids must be integers, got an array of dtype " + str(out.dtype))
if vocab_size is None:
    return out
flat = out.ravel()
bad = (flat < 0) | (flat >= vocab_size)
if bad.any():
    raise TokenIdError(f"token id {flat[np.argmax(bad)]} is out of range: "
                       f"ids must be in [0, {vocab_size})")
return out"""],
        ["""while isinstance(ids, Tensor):
    ids = ids.data
if isinstance(ids, (str, bytes)):
    raise TypeError("as_token_ids got text, " + repr(ids)[:40] + ": token ids must be integers")
if isinstance(ids, (list, tuple)) and len(ids) == 0:
    return np.empty((0,), np.int64)
result = np.asarray(ids)
if result.dtype == bool or not np.issubdtype(result.dtype, np.integer):
    raise TypeError(f"token ids need an integer dtype; these have {result.dtype}")
if vocab_size is not None and result.size > 0:
    low, high = result.min(), result.max()
    if low < 0 or high >= vocab_size:
        first = next(v for v in result.flat if v < 0 or v >= vocab_size)
        raise TokenIdError(f"token id {first} is out of range: ids must be in [0, {vocab_size})")
return result"""],
    ],
    "sinusoidal": [
        ["""out = np.zeros((max_seq_length, embedding_dim), dtype=np.float64)
for pos in range(max_seq_length):
    for i in range(0, embedding_dim, 2):
        angle = pos * base ** (-i / embedding_dim)
        out[pos, i] = math.sin(angle)
        if i + 1 < embedding_dim:
            out[pos, i + 1] = math.cos(angle)
return out.astype(np.float32)"""],
        ["""half = (embedding_dim + 1) // 2
omega = base ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)
theta = np.outer(np.arange(max_seq_length, dtype=np.float64), omega)
interleaved = np.stack([np.sin(theta), np.cos(theta)], axis=-1).reshape(max_seq_length, 2 * half)
return interleaved[:, :embedding_dim].astype(np.float32)"""],
        ["""result = np.empty((max_seq_length, embedding_dim), np.float32)
p = np.arange(max_seq_length, dtype=np.float64)
for col in range(embedding_dim):
    rate = base ** (-(col - col % 2) / embedding_dim)
    wave = np.sin if col % 2 == 0 else np.cos
    result[:, col] = wave(p * rate)
return result"""],
    ],
    "shift": [
        ["""freqs = [base ** (-np.arange(0, embedding_dim, 2)[j] / embedding_dim)
         for j in range(embedding_dim // 2)]
blocks = [np.array([[math.cos(k * f), math.sin(k * f)], [-math.sin(k * f), math.cos(k * f)]])
          for f in freqs]
out = np.zeros((embedding_dim, embedding_dim), dtype=np.float64)
for j, block in enumerate(blocks):
    out[2 * j:2 * j + 2, 2 * j:2 * j + 2] = block
return out"""],
        ["""n = embedding_dim // 2
w = base ** (-np.arange(0, embedding_dim, 2) / embedding_dim)
c, s = np.cos(k * w), np.sin(k * w)
M = np.zeros((embedding_dim, embedding_dim))
even, odd = np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2)
M[even, even], M[even, odd] = c, s
M[odd, even], M[odd, odd] = -s, c
return M"""],
        ["""result = np.eye(embedding_dim)
for pair, rate in enumerate(base ** (-np.arange(0, embedding_dim, 2) / embedding_dim)):
    theta = k * rate
    r = 2 * pair
    result[r, r] = result[r + 1, r + 1] = np.cos(theta)
    result[r, r + 1] = np.sin(theta)
    result[r + 1, r] = -np.sin(theta)
return result"""],
    ],
    "learned": [
        ["""if inplace:
    x.data += rows
    out = x.data
else:
    out = x.data + rows
def grad_fn(g):
    g_positions = g.sum(axis=0) if g.ndim == 3 else g
    dense = np.zeros(W.shape, dtype=W.dtype)
    dense[start:start + seq] = g_positions
    return g, dense
return Tensor._from_op(out, (x, W), grad_fn)"""],
        ["""result = x.data if inplace else np.array(x.data, copy=True)
result += rows
positions = np.arange(start, start + seq)
def grad_fn(upstream):
    per_row = upstream.reshape(-1, seq, dim).sum(axis=0)
    grad_w = np.zeros_like(W.data)
    np.add.at(grad_w, positions, per_row.astype(W.dtype))
    return upstream, grad_w
return Tensor._from_op(result, (x, W), grad_fn)"""],
        ["""total = np.add(x.data, rows, out=x.data) if inplace else rows + x.data
def grad_fn(dy):
    batch_sum = dy if dy.ndim == 2 else dy.sum(axis=tuple(range(dy.ndim - 2)))
    return dy, RowSparseGrad(W.shape, np.arange(start, start + seq),
                             np.asarray(batch_sum, dtype=W.dtype), keep_sparse=False)
return Tensor._from_op(total, (x, W), grad_fn)"""],
    ],
    "tpe-forward": [
        ["""token_ids = as_token_ids(input_ids, None)
if token_ids.ndim != 1 and token_ids.ndim != 2:
    raise ValueError("TokenPositionEmbedding expects (seq,) or (batch, seq) ids, got shape %s"
                     % (token_ids.shape,))
seq_len = token_ids.shape[-1]
begin = _position_start(start_pos, seq_len, self.max_seq_length, 'TokenPositionEmbedding')
vectors = self.tokens(token_ids)
factor = math.sqrt(self.embedding_dim) if self.scale_embeddings else None
vectors = vectors * factor if factor is not None else vectors
if self.positions is None:
    return vectors
return self.positions(vectors, inplace=True, start_pos=begin)"""],
        ["""arr = as_token_ids(input_ids, None)
if not 1 <= arr.ndim <= 2:
    raise ValueError(f"token ids must be 1-D or 2-D, got shape {arr.shape}")
offset = _position_start(start_pos, arr.shape[arr.ndim - 1], self.max_seq_length,
                         'TokenPositionEmbedding')
emb = self.tokens(arr)
if self.scale_embeddings:
    emb = emb * float(np.sqrt(self.embedding_dim))
if self.positions is not None:
    emb = self.positions(emb, inplace=True, start_pos=offset)
return emb"""],
        ["""checked = as_token_ids(input_ids, None)
dims = checked.ndim
if dims < 1 or dims > 2:
    raise ValueError("expected ids of shape (seq,) or (batch, seq), not " + str(checked.shape))
length = checked.shape[-1]
first = _position_start(start_pos, length, self.max_seq_length, 'TokenPositionEmbedding')
looked_up = self.tokens(checked)
scaled = looked_up * math.sqrt(self.embedding_dim) if self.scale_embeddings else looked_up
if self.positions is None:
    return scaled
return self.positions(scaled, inplace=True, start_pos=first)"""],
    ],
    "tie": [
        ["""vocab = d_logits.shape[-1]
lookup_part = embedding_grad(ids, d_rows, vocab, padding_idx)
readout_part = np.einsum('nv,nd->vd', d_logits.reshape(-1, vocab),
                         hidden.reshape(-1, hidden.shape[-1]))
return (lookup_part + readout_part).astype(d_rows.dtype)"""],
        ["""V = d_logits.shape[-1]
H = hidden.reshape(-1, hidden.shape[-1])
G = d_logits.reshape(-1, V)
readout = np.zeros((V, H.shape[1]))
for n in range(G.shape[0]):
    readout += np.outer(G[n], H[n])
return embedding_grad(ids, d_rows, V, padding_idx) + readout.astype(d_rows.dtype)"""],
        ["""table_rows, width = d_logits.shape[-1], hidden.shape[-1]
through_readout = np.tensordot(d_logits.reshape(-1, table_rows), hidden.reshape(-1, width),
                               axes=([0], [0]))
through_lookup = embedding_grad(ids, d_rows, table_rows, padding_idx=padding_idx)
total = through_lookup.copy()
total += through_readout
return total"""],
    ],
    "rope": [
        ["""pairs = x.reshape(*x.shape[:-1], -1, 2)
first, second = pairs[..., 0], pairs[..., 1]
turned = np.stack([first * cos - second * sin, first * sin + second * cos], axis=-1)
return turned.reshape(x.shape).astype(x.dtype)"""],
        ["""z = x[..., 0::2] + 1j * x[..., 1::2]
z = z * (cos + 1j * sin)
result = np.empty_like(x)
result[..., 0::2], result[..., 1::2] = z.real, z.imag
return result"""],
        ["""y = x.copy()
for i in range(x.shape[-1] // 2):
    u, v = x[..., 2 * i], x[..., 2 * i + 1]
    y[..., 2 * i] = u * cos[:, i] - v * sin[:, i]
    y[..., 2 * i + 1] = u * sin[:, i] + v * cos[:, i]
return y"""],
    ],
}


def _with_bodies(cell_source, bodies):
    "The instructor's cell with its solution regions replaced, in order, by `bodies` (indented)."
    out, bodies, skipping = [], list(bodies), False
    for line in cell_source.splitlines():
        stripped = line.strip()
        if stripped == "### BEGIN SOLUTION":
            indent = line[:len(line) - len(line.lstrip())]
            out.append(indent + MY_BEGIN)
            body = bodies.pop(0).splitlines()
            out += [indent + body_line if body_line else "" for body_line in body]
            skipping = True
        elif stripped == "### END SOLUTION":
            out.append(line.replace("### END SOLUTION", MY_END))
            skipping = False
        elif not skipping:
            out.append(line)
    return "\n".join(out)


def solved_as(release, source, ways):
    """The release with every code solution written one way: `ways` is an int (the same way for
    every cell) or a dict cell id -> way; way 0 is the instructor's code in a student's words, 1-3
    the `VARIANTS`."""
    nb = copy.deepcopy(release)
    ref = cells_by_id(source)
    for cell in nb["cells"]:
        g = cell.get("metadata", {}).get("nbgrader") or {}
        if not g.get("solution"):
            continue
        if cell["cell_type"] != "code":
            cell["source"] = "My answer: the table costs vocab x dim x 4 bytes, so ..."
            continue
        way = ways if isinstance(ways, int) else ways.get(cell["id"], 0)
        original = src(ref[cell["id"]])
        if way == 0 or cell["id"] not in VARIANTS:
            cell["source"] = in_own_words(original)
        else:
            cell["source"] = _with_bodies(original, VARIANTS[cell["id"]][way - 1])
    return nb


# A copy of way 1 disguised: every local name it introduced renamed, and in each cell with
# statements that don't depend on each other, their order changed.
RENAMES = {"n": "vocab_n", "i": "tok", "out": "acc_rows", "position": "k", "row_id": "target",
           "totals": "sums",
           "keys": "ordered_keys", "unique": "uniq", "summed": "row_sums", "ids_1d": "flat_tokens",
           "grads_2d": "flat_grads", "mask": "keep", "scale": "sigma", "limit": "bound_value",
           "u": "draws", "arr": "token_array", "outside": "out_of_range", "pos": "p_idx",
           "angle": "phase", "freqs": "omegas", "blocks": "rotations", "block": "rot",
           "j": "pair_no",
           "g_positions": "per_pos", "dense": "full_grad",
           "token_ids": "tids", "seq_len": "length_", "begin": "first_pos", "vectors": "embedded",
           "factor": "mult", "vocab": "num_tokens", "lookup_part": "from_rows",
           "readout_part": "from_logits",
           "pairs": "xy", "first": "xs", "second": "ys", "turned": "rotated"}


def _move_line(text, line, before):
    "`text` with the line starting (after indentation) with `line` moved to just before `before`'s."
    lines = text.splitlines()
    moved = lines.pop(next(k for k, l in enumerate(lines) if l.strip().startswith(line)))
    lines.insert(next(k for k, l in enumerate(lines) if l.strip().startswith(before)), moved)
    return "\n".join(lines)


def disguised_copy(nb):
    """A copy of the way-1 notebook `nb` as a student who copied it might hand it in: the names it
    introduced renamed, independent statements moved, comments of their own added."""
    nb = copy.deepcopy(nb)
    moves = {"tie": ("lookup_part = ", "return (lookup_part"),       # (a line, the line it goes before)
             "tpe-forward": ("factor = ", "vectors = self.tokens(token_ids)"),
             "scatter": ("summed = np.array(", "unique = np.array("),
             "shift": ("out = np.zeros(", "freqs = [")}
    for cell in nb["cells"]:
        g = cell.get("metadata", {}).get("nbgrader") or {}
        if cell["cell_type"] != "code" or not g.get("solution") or cell["id"] not in VARIANTS:
            continue
        text = src(cell)
        if cell["id"] in moves:
            text = _move_line(text, *moves[cell["id"]])
        inside, lines = False, []
        for line in text.splitlines():
            if line.strip() == MY_BEGIN:
                inside = True
            elif line.strip() == MY_END:
                inside = False
            elif inside:
                line = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: RENAMES.get(m[0], m[0]), line)
                line = line + "  # done" if line.strip().startswith("return") else line
            lines.append(line)
        cell["source"] = "\n".join(lines)
    return nb


def random_ways(rng: random.Random) -> dict:
    "A way (0-3) for each cell, drawn by `rng`: a synthetic student of a large class."
    return {cell_id: rng.randrange(4) for cell_id in VARIANTS}


# A failure message that carries a student's markup: the lookup raises ValueError with script in its
# text, and the test's message quotes it. On the class report's page it must stay text. (No quotes
# or digits in the script: the report masks those in a message, and the script must still say that
# it ran.)
HOSTILE_RAISE = ("\n    if ids.size and ids.min() < 0:\n        raise ValueError("
                 "'<script>console.log(/{mark}message/.source)</script>"
                 "<img src=x onerror=console.log(/{mark}message-img/.source)>')")


def report_class(release, source, mark):
    """student -> notebook: a small class for the class report. ada, bea and cyd wrote the exercises
    each their own way, copycat handed in ada's code with the names changed and statements moved,
    blank handed in the release, and hostile's lookup fails with script in its message (`mark`: what
    a payload logs when it runs)."""
    hostile = solved_as(release, source, 0)
    cell = cells_by_id(hostile)["lookup"]
    cell["source"] = src(cell).replace(MY_BEGIN, MY_BEGIN + HOSTILE_RAISE.format(mark=mark), 1)
    ada = solved_as(release, source, 1)
    return {"ada": ada, "bea": solved_as(release, source, 2), "cyd": solved_as(release, source, 3),
            "copycat": disguised_copy(ada), "blank": copy.deepcopy(release), "hostile": hostile}
