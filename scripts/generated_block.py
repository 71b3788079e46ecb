"""scripts/generated_block.py - the one way a generated block replaces the text between two
markers of a Markdown file (the README's results and lesson tables, docs/setup.md's portability
table)."""


def replace_between_text(text, begin, end, block):
    """Returns (text, new text) with `block` between the `begin` and `end` lines of `text`.
    Raises ValueError with a message when a marker is missing."""
    if begin not in text or end not in text:
        raise ValueError("no %s ... %s markers" % (begin, end))
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return text, head + begin + "\n" + block + "\n" + end + tail


def replace_between(path, begin, end, block):
    """Returns (old text, new text) of `path` with `block` between the `begin` and `end` lines.
    Raises ValueError with a message when the file cannot be read or lacks a marker."""
    try:
        text = open(path).read()
    except OSError as e:
        raise ValueError("cannot read %s: %s" % (path, e))
    try:
        return replace_between_text(text, begin, end, block)
    except ValueError as e:
        raise ValueError("%s has %s" % (path, e))
