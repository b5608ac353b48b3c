"""Re-signing a mutated checkpoint: every shard checksum and then metadata_fnv1a recomputed as a
save writes them (core/training/checkpoint.cc), so that the mutant reaches the checks behind them."""
import json
import os


def fnv1a(data):
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def compact_dump(value):
    """nlohmann::json::dump() of the same value: compact, keys sorted, UTF-8 unescaped."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def resign_checkpoint(directory):
    """Recomputes every shard checksum and then metadata_fnv1a, as a save would have written them."""
    path = os.path.join(directory, "metadata.json")
    try:
        with open(path, encoding="utf-8") as file:
            metadata = json.load(file)
        for entry in metadata.get("shard_files", []):
            shard = os.path.join(directory, str(entry.get("file", "")))
            if os.path.basename(shard) == shard[len(directory) + 1:] and os.path.isfile(shard):
                with open(shard, "rb") as file:
                    entry["fnv1a"] = fnv1a(file.read())
        body = {key: value for key, value in metadata.items() if key != "metadata_fnv1a"}
        metadata["metadata_fnv1a"] = fnv1a(compact_dump(body).encode())
        with open(path, "w", encoding="utf-8") as file:
            json.dump(metadata, file, indent=1, sort_keys=True, ensure_ascii=False)
    except (ValueError, AttributeError, TypeError, RecursionError, OSError):
        pass  # not JSON any more, or not an object: left as mutated
