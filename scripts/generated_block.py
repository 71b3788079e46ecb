"""scripts/generated_block.py - the one way a generated block replaces the text between two
markers of a Markdown file (the README's results table, docs/setup.md's portability table)."""


def replace_between(path, begin, end, block):
    """Returns (old text, new text) of `path` with `block` between the `begin` and `end` lines.
    Raises ValueError with a message when the file cannot be read or lacks a marker."""
    try:
        text = open(path).read()
    except OSError as e:
        raise ValueError("cannot read %s: %s" % (path, e))
    if begin not in text or end not in text:
        raise ValueError("%s has no %s ... %s markers" % (path, begin, end))
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return text, head + begin + "\n" + block + "\n" + end + tail
