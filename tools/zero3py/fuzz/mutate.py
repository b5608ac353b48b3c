"""The seeded mutators. JSON-aware (mutate_json): a value replaced by a boundary number, a wrong
type, a huge string or a deep nest, a key dropped or added, an element duplicated or wrapped.
Byte-level (mutate_bytes): bits flipped, bytes set, inserted, deleted or repeated, the file cut
short. mutate_file applies one to three of either to a file (JSON mostly as JSON). Every choice is
drawn from the given random.Random in a fixed order, so a seed gives the same mutants; each
mutation appends a line saying what it did to `log`."""
import copy
import json


BOUNDARY_VALUES = [0, -1, 1, 2, 3, 7, 2**20, 2**24 + 1, 2**30, 2**31 - 1, 2**31, 2**32 + 1, 2**53 + 1, 2**63 - 1, 2**63, -2**63, 2**64,
                   1e308, -1e308, 5e-324, 0.5, -0.0, 1.5, 1e-30, "", "x", "a" * 5000, "layers.0", "../x", True,
                   False, None, [], {}, [0], [-1, 2**40], {"a": 1}]


def json_slots(value, path=()):
    """Every (path) in the tree, the root included."""
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from json_slots(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from json_slots(child, path + (index,))


def get_at(value, path):
    for key in path:
        value = value[key]
    return value


def deep_nest(rng):
    depth = rng.choice([64, 2000, 100000])
    return json.loads("[" * min(depth, 500) + "]" * min(depth, 500)) if depth <= 500 else ("DEEP", depth)


NUMBERS = [value for value in BOUNDARY_VALUES if isinstance(value, (int, float)) and not isinstance(value, bool)]
STRINGS = [value for value in BOUNDARY_VALUES if isinstance(value, str)]
# Mutation kinds and weights: most keep the value's type (a number stays a number), so that many
# mutants get past the schema checks to the checks behind them.
JSON_OPS = [("perturb", 3), ("same_type", 3), ("any_value", 2), ("delete", 1), ("add_key", 1), ("duplicate", 1),
            ("wrap", 0.5), ("nest", 0.5)]


def mutate_json(value, rng, log):
    slots = list(json_slots(value))
    leaves = [path for path in slots if not isinstance(get_at(value, path), (dict, list))]
    op = rng.choices([name for name, _ in JSON_OPS], weights=[weight for _, weight in JSON_OPS])[0]
    path = rng.choice(leaves if op in ("perturb", "same_type") and leaves else slots)
    where = "/" + "/".join(str(key) for key in path)
    parent = get_at(value, path[:-1]) if path else None
    current = get_at(value, path)
    is_number = isinstance(current, (int, float)) and not isinstance(current, bool)
    if op == "perturb" and is_number:
        new = rng.choice([current + 1, current - 1, -current, current * 2**rng.randint(1, 40), current + 0.5,
                          current * 1000003])
        log.append(f"{where}: {current!r} -> {new!r}")
        return set_at(value, path, new)
    if op == "same_type" and (is_number or isinstance(current, (str, bool))):
        pool = NUMBERS if is_number else STRINGS if isinstance(current, str) else [not current]
        new = copy.deepcopy(rng.choice(pool))
        log.append(f"{where}: {short(current)} -> {short(new)}")
        return set_at(value, path, new)
    if op == "delete" and path:
        log.append(f"{where}: deleted")
        del parent[path[-1]]
        return value
    if op == "add_key" and isinstance(current, dict):
        key = rng.choice(["extra", "type", "layers", "stage", "zero3_model_spec", "name", ""])
        new = rng.choice(BOUNDARY_VALUES)
        log.append(f"{where}: key {key!r} = {short(new)}")
        current[key] = copy.deepcopy(new)
        return value
    if op == "duplicate" and isinstance(current, list) and current:
        index = rng.randrange(len(current))
        log.append(f"{where}: element {index} repeated")
        current.insert(index, copy.deepcopy(current[index]))
        return value
    if op == "wrap":
        log.append(f"{where}: wrapped in an array")
        return set_at(value, path, [current])
    if op == "nest":
        new = deep_nest(rng)
        log.append(f"{where}: nested {new[1] if isinstance(new, tuple) else 'deeply'}")
        return set_at(value, path, new)
    new = copy.deepcopy(rng.choice(BOUNDARY_VALUES))
    log.append(f"{where}: {short(current)} -> {short(new)}")
    return set_at(value, path, new)


def mutation_count(rng):
    return rng.choices([1, 2, 3], weights=[7, 2, 1])[0]


def short(value):
    text = json.dumps(value) if not isinstance(value, tuple) else f"<nest {value[1]}>"
    return text if len(text) <= 40 else text[:37] + "..."


def set_at(value, path, new):
    if not path:
        return new
    get_at(value, path[:-1])[path[-1]] = new
    return value


def render_json(value):
    """Text of a mutated JSON value; ("DEEP", n) stands for n nested arrays (too deep for json.dumps)."""
    placeholder = "\"__zero3_deep__\""
    deep = []

    def strip(node):
        if isinstance(node, tuple):
            deep.append(node[1])
            return "__zero3_deep__"
        if isinstance(node, dict):
            return {key: strip(child) for key, child in node.items()}
        if isinstance(node, list):
            return [strip(child) for child in node]
        return node

    text = json.dumps(strip(value), indent=1)
    for depth in deep:
        text = text.replace(placeholder, "[" * depth + "]" * depth, 1)
    return text.encode()


def mutate_bytes(data, rng, log):
    data = bytearray(data)
    op = rng.choice(["flip", "set", "truncate", "insert", "delete", "repeat"])
    if not data:
        op = "insert"
    at = rng.randrange(len(data) + 1 if op == "insert" else len(data))
    if op == "flip":
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        log.append(f"byte {at}: bit {bit} flipped")
    elif op == "set":
        data[at] = rng.choice([0, 0xFF, 0x7F, 0x80, ord('"'), ord("{"), ord("9"), ord("-")])
        log.append(f"byte {at}: set to {data[at]:#x}")
    elif op == "truncate":
        del data[at:]
        log.append(f"cut at byte {at}")
    elif op == "insert":
        chunk = bytes(rng.choice(b'{}[]",:0123456789-eE.tfn \x00\xff') for _ in range(rng.randint(1, 8)))
        data[at:at] = chunk
        log.append(f"byte {at}: inserted {chunk!r}")
    elif op == "delete":
        length = rng.randint(1, 16)
        del data[at:at + length]
        log.append(f"bytes {at}..{at + length}: deleted")
    else:
        length = rng.randint(1, 64)
        data[at:at] = data[at:at + length]
        log.append(f"bytes {at}..{at + length}: repeated")
    return bytes(data)


def mutate_file(path, rng, log):
    with open(path, "rb") as file:
        data = file.read()
    if path.endswith(".json") and rng.random() < 0.7:
        try:
            value = json.loads(data)
        except ValueError:
            value = None
        if value is not None:
            for _ in range(mutation_count(rng)):
                value = mutate_json(value, rng, log)
            data = render_json(value)
            with open(path, "wb") as file:
                file.write(data)
            return
    for _ in range(mutation_count(rng)):
        data = mutate_bytes(data, rng, log)
    with open(path, "wb") as file:
        file.write(data)
