"""safetensors files written and read by hand (8-byte LE header length, JSON header, LE bytes):
zero3 --init-from reads what write_safetensors writes, and read_safetensors reads what
`zero3 consolidate --format safetensors` and `zero3 inspect --dump-data / --dump-logits` write.
No dependency on the safetensors package (the oracle checks the two agree when it is installed).
"""
import json
import struct

import numpy as np
import torch


def write_safetensors(path, tensors, metadata=None):
    """name -> tensor written as F32 in the given order; `metadata` (str -> str) as __metadata__."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, tensor in tensors.items():
        data = tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the buffer starts 8-byte aligned, as the format recommends
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path, metadata=None):
    """name -> f32 tensor (F32 as is, BF16 widened exactly); the header's __metadata__ into
    `metadata` (a dict) when given."""
    with open(path, "rb") as file:
        data = file.read()
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + length])
    buffer = data[8 + length:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if metadata is not None:
                metadata.update(entry)
            continue
        begin, end = entry["data_offsets"]
        if entry["dtype"] == "F32":
            values = np.frombuffer(buffer[begin:end], "<f4")
        elif entry["dtype"] == "BF16":
            values = (np.frombuffer(buffer[begin:end], "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name} has dtype {entry['dtype']}")
        out[name] = torch.from_numpy(values.astype(np.float32)).reshape(entry["shape"])
    return out
