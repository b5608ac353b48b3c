"""The text layout of a repro script (repro.py, repro_model.py): Python literals of JSON values
and float32s (each written so that it reads back as the same float32), calls broken across lines
after their opening parenthesis, one-line methods and constructors where they fit, and literals
filled greedily into lines of at most WIDTH characters.

    literal({"lr": 0.003})                       # '{"lr": 0.003}'
    layout(Call("model = Layers", [...]), 0)     # its lines, continuation lines aligned
    fill_literal("CONFIG = ", config)            # dict(...) over as few lines as fit
"""
import json
import math
import struct

from zero3py.runners.training import Unsupported

WIDTH = 118  # the longest line the layout aims for (the project writes 120)
WHOLE = 40  # an exact-data script's lists of at most this many characters stay on one line


def float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def number(value):
    """A float as its shortest literal, or, for a float32 (zero3 writes case.json's floats from its
    float32s: 0.003000000026077032), the shortest literal of the same float32 (0.003)."""
    value = float(value)
    if not math.isfinite(value) or float32(value) != value:
        return repr(value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if float32(float(text)) == value:
            return repr(float(text))
    return repr(value)


def literal(value):
    """A Python literal of a JSON value, floats written as number() writes them."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def method(signature, expression, indent=4):
    """`def signature: return expression` on one line, or two when that is over WIDTH characters."""
    line = " " * indent + f"def {signature}: return {expression}"
    if len(line) <= WIDTH:
        return [line]
    return [" " * indent + f"def {signature}:", " " * (indent + 4) + f"return {expression}"]


class Call:
    """A constructor call `head(args...)tail` that the layout may break across lines."""

    def __init__(self, head, args, tail=""):
        self.head, self.args, self.tail = head, args, tail

    def __str__(self):
        return f"{self.head}({', '.join(map(str, self.args))}){self.tail}"


def layout(node, column, width=WIDTH):
    """Lines of `node` (a Call or text) starting at `column`, the first line unpadded: the
    arguments filled greedily, continuation lines aligned after the opening parenthesis, an
    argument too long for a line of its own laid out the same way inside."""
    text = str(node)
    if column + len(text) <= width or not isinstance(node, Call) or not node.args:
        return [text]
    inner = column + len(node.head) + 1
    lines, line, position = [], node.head + "(", inner
    for i, arg in enumerate(node.args):
        end = ", " if i < len(node.args) - 1 else ")" + node.tail
        piece = str(arg) + end
        if position + len(piece.rstrip()) <= width:
            line, position = line + piece, position + len(piece)
            continue
        if position > inner:  # a fresh line for it
            lines.append(line.rstrip())
            line, position = " " * inner, inner
            if position + len(piece.rstrip()) <= width:
                line, position = line + piece, position + len(piece)
                continue
        nested = layout(arg, position, width - len(end.rstrip()))  # room for what closes after it
        nested[0] = line + nested[0]
        lines += nested[:-1]
        line = nested[-1] + end
        position = len(line)
    lines.append(line.rstrip())
    return lines


def assignments(pairs):
    """`a, b = x, y` of (target, value) pairs, as one statement (a list of one line)."""
    return [f"{', '.join(t for t, _ in pairs)} = {', '.join(v for _, v in pairs)}"]


def constructor(args, statements, comment=""):
    """__init__ lines: `def __init__(self, args): super().__init__(); statement` on one line where
    one statement fits there (its comment dropped if only that is too long); else the def line (the
    comment on it), super().__init__() sharing the next line with the first statement where it
    fits, and the others one a line. A statement may hold newlines (its own continuation lines)."""
    head = f"    def __init__(self{', ' + args if args else ''}):"
    tail = f"  # {comment}" if comment else ""
    if len(statements) == 1 and "\n" not in statements[0]:
        line = f"{head} super().__init__(); {statements[0]}"
        if len(line + tail) <= WIDTH:
            return [line + tail]
        if len(line) <= WIDTH:
            return [line]
    lines = [head + tail if len(head + tail) <= WIDTH else head]
    first = statements[0].split("\n")
    joined = "        super().__init__(); " + first[0]
    if len(joined) > WIDTH and "  # " in joined and len(joined[:joined.rindex("  # ")]) <= WIDTH:
        joined = joined[:joined.rindex("  # ")]  # its comment dropped, the statement kept whole
    if len(joined) <= WIDTH:
        lines += [joined] + first[1:]
    else:
        lines += ["        super().__init__()", "        " + first[0]] + first[1:]
    for statement in statements[1:]:
        parts = statement.split("\n")
        lines += ["        " + parts[0]] + parts[1:]
    return lines


def fill_literal(prefix, value, width=WIDTH, indent=4):
    """`prefix` and a dict or list literal, its items filled greedily into lines of at most
    `width`, broken only between items (a nested dict opens on the line of its key); continuation
    lines indented by `indent`."""
    return fill_atoms(prefix, literal_atoms(value), width=width, indent=indent)


def fill_atoms(prefix, atoms, comment="", width=WIDTH, indent=4):
    """`prefix` and `atoms` (pieces of a literal, literal_atoms) filled greedily into lines of at most
    `width`; `comment` ends the first line, or the last where the first has no room for it."""
    def fill(first_width):
        lines, line = [], prefix
        for atom in atoms:
            limit = first_width if not lines else width
            if line.strip() and len(line) + 1 + len(atom) > limit and line != prefix:
                lines.append(line)
                line = " " * indent + atom
            else:
                line = f"{line}{'' if line == prefix else ' '}{atom}"
        return lines + [line]
    if not comment:
        return fill(width)
    tail = f"  # {comment}"
    lines = fill(width)
    if len(lines[-1] + tail) <= width:  # the last line has room: the fewest lines
        return lines[:-1] + [lines[-1] + tail]
    shorter = fill(width - len(tail))
    if len(shorter) == len(lines) and len(shorter[0] + tail) <= width:
        return [shorter[0] + tail] + shorter[1:]
    return lines


def checked(values):
    """A nested list of numbers as it is, or Unsupported when one is not finite (no literal)."""
    for value in values:
        if isinstance(value, list):
            checked(value)
        elif not math.isfinite(value):
            raise Unsupported(f"a non-finite value ({value}) in the case's weights or data")
    return values


def literal_atoms(value, whole=0):
    """The literal of `value` cut between its items, a dict of identifier keys as dict(key=value):
    ['dict(a=1,', 'b=dict(c=2,', 'd=3))']; a list whose literal takes at most `whole` characters
    kept in one piece."""
    if not isinstance(value, (dict, list, tuple)) or not value or (
            isinstance(value, list) and len(literal(value)) <= whole):
        return [literal(value)]
    keywords = isinstance(value, dict) and all(isinstance(k, str) and k.isidentifier() for k in value)
    opening, closing = ("dict(", ")") if keywords else ("{", "}") if isinstance(value, dict) else ("[", "]")
    items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    atoms = []
    for i, (key, item) in enumerate(items):
        head = "" if key is None else f"{key}=" if keywords else literal(key) + ": "
        inner = literal_atoms(item, whole)
        inner[0] = head + inner[0]
        if i == 0:
            inner[0] = opening + inner[0]
        inner[-1] += closing if i == len(items) - 1 else ","
        atoms += inner
    return atoms
