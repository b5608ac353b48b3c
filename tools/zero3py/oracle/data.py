"""llm.c token files and its DataLoader's batches (core/models/token_file_data.h): the oracle's gpt
data, written here and read back as llm.c reads it."""
import numpy as np
import torch


def write_token_file(path, tokens):
    header = np.zeros(256, "<i4")
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as out:
        out.write(header.tobytes() + np.asarray(tokens, "<u2").tobytes())


def read_token_file(path):
    with open(path, "rb") as file:
        header = np.frombuffer(file.read(1024), "<i4")
        assert header[0] == 20240520 and header[1] == 1, f"{path}: not an llm.c token file"
        return np.frombuffer(file.read(), "<u2")[:header[2]].astype(np.int64)


def llmc_global_batch(tokens, g, rows_per_rank, context, world):
    """Micro-step g's W ranks' batches stacked in rank order: rank r's window of B*T + 1 tokens
    starts at (g mod E) * W*B*T + r*B*T, so the W windows tile one window of W*B*T + 1 tokens."""
    span = rows_per_rank * context * world
    start = (g % ((len(tokens) - 1) // span)) * span
    window = torch.from_numpy(tokens[start:start + span + 1].copy())
    return window[:-1].reshape(-1, context), window[1:].reshape(-1, context)
